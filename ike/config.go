package ike

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/ipsecd/ipsecd/ike/proposal"
)

// Config is one connection as the daemon's connections: section describes
// it (swanctl.conf's vocabulary). It is read, never changed, by the SAs
// made from it.
type Config struct {
	// LocalID and RemoteID are the identities (see ParseIdentity):
	// an address, a name, user@host or a distinguished name. RemoteID
	// %any (the zero Identity) accepts any; with RemoteAuth pubkey,
	// any identity the peer's certificate proves. With LocalAuth pubkey
	// a LocalID of %any is the certificate's subject.
	LocalID, RemoteID Identity
	// LocalAuth and RemoteAuth say how each side authenticates
	// (swanctl's local.auth, remote.auth); empty means AuthPSK.
	LocalAuth, RemoteAuth AuthClass
	PSK                   []byte
	// LocalCerts are our certificate and then its chain towards the
	// peer's trust anchor (local.certs), for LocalAuth pubkey; PrivateKey
	// is the certificate's RSA or ECDSA key (see LoadPrivateKey).
	LocalCerts []*x509.Certificate
	PrivateKey crypto.Signer
	// CACerts are the trust anchors the peer's certificate must chain to
	// (remote.cacerts), for RemoteAuth pubkey; they are also named in
	// our CERTREQ payloads.
	CACerts []*x509.Certificate
	// PeerCerts pin the peer's certificate (remote.certs), for RemoteAuth
	// pubkey: only a certificate equal to one of them, byte for byte,
	// authenticates the peer. It must be valid now and prove RemoteID,
	// and chain to CACerts when there are any; without CACerts a pinned
	// certificate is its own trust anchor, as in strongSwan.
	PeerCerts []*x509.Certificate
	// ClassicSignatures leaves SIGNATURE_HASH_ALGORITHMS out of
	// IKE_SA_INIT, so that both sides sign with the classic methods (RSA
	// with SHA-1, ECDSA by curve) instead of RFC 7427's (strongSwan's
	// signature_authentication = no). For peers that need it.
	ClassicSignatures bool
	// DisableFragmentation leaves FRAGMENTATION_SUPPORTED out of
	// IKE_SA_INIT: no IKE fragmentation (RFC 7383) either way
	// (strongSwan's fragmentation = no).
	DisableFragmentation bool
	// FragmentSize is the largest IP datagram an IKE fragment fills
	// (strongSwan's fragment_size); 0 means DefaultFragmentSize.
	FragmentSize int
	// Proposals are the IKE proposals in order of preference.
	Proposals []proposal.Proposal
	// Child is the child our IKE_AUTH request proposes as initiator.
	Child ChildConfig
	// Children are all the connection's children (swanctl's children
	// section), Child among them: a peer's IKE_AUTH or CREATE_CHILD_SA
	// for a new child gets the first whose selectors its offer meets
	// (narrowed as usual), and CreateChild brings up any of them under
	// the IKE SA. Empty means Child alone.
	Children []ChildConfig
	// ForceEncap makes NAT detection report a NAT (strongSwan's
	// encap = yes): the source hash sent is random.
	ForceEncap bool
	// Retransmit is the request retransmission schedule; a zero Timeout
	// means DefaultRetransmit.
	Retransmit Retransmit
	// MaxChildren bounds the CHILD_SAs one IKE SA holds, counting those
	// a rekey replaced and that are not deleted yet: a peer's
	// CREATE_CHILD_SA that would pass it is answered TEMPORARY_FAILURE.
	// 0 means DefaultMaxChildren; at least MinMaxChildren.
	MaxChildren int
	// Keylog keeps, for the daemon's keylog, the Wireshark lines of the
	// key sets that IKE_INTERMEDIATE's key updates replaced (TakeKeylog);
	// KeylogIKE gives the last one.
	Keylog bool
	// Rand is the source of SPIs, nonces and private keys; nil means
	// crypto/rand.
	Rand io.Reader
	// AllocSPI returns a fresh inbound ESP SPI (>= 256) that no SA of the
	// daemon uses; nil means a random one.
	AllocSPI func() (uint32, error)
	// HasContact reports whether the daemon holds another IKE SA
	// between our identity and the peer's (as the ID payloads carry
	// them: with a certificate and no LocalID, the certificate's
	// subject). It is asked when we build our IKE_AUTH request as
	// initiator; when it says no, the request carries INITIAL_CONTACT
	// (RFC 7296 §2.4) and the peer may delete every other IKE SA it
	// holds with us, those of our previous life. nil never sends it,
	// and neither does a RemoteID of %any: as charon, only a peer
	// identity known in advance is asked about. The peer's
	// INITIAL_CONTACT is reported as EventInitialContact whatever this
	// says.
	HasContact func(local, remote Identity) bool
	// Admit, when set, is asked by a responder once the peer
	// authenticated, before its IKE_AUTH answer establishes the SA
	// (after the last EAP round with EAP): false refuses the SA with
	// AUTHENTICATION_FAILED alone (ErrDuplicate), as strongSwan's
	// unique = keep refuses a second IKE SA of one identity.
	// initialContact says whether the request carried INITIAL_CONTACT.
	// The daemon may end its other SAs here (unique = replace), so that
	// their leases are free for this SA's configuration payload, which
	// is answered after the call.
	Admit func(sa *SA, initialContact bool) bool
	// EAPSecret returns the secret of an EAP identity (a user's
	// password), false for one it does not know: what a RemoteAuth of
	// EAP checks the peer against. The engine reads the bytes during
	// the call and keeps none.
	EAPSecret func(identity string) ([]byte, bool)
	// RemoteEAPID, when set, is the one EAP identity admitted (remote
	// eap_id); "" admits any that EAPSecret knows.
	RemoteEAPID string
	// LocalEAPID is our EAP identity with a LocalAuth of EAP (local
	// eap_id); "" is LocalID's text. Its password is EAPSecret's.
	LocalEAPID string
	// VIPs are the virtual IPs we ask the gateway for as initiator
	// (swanctl's vips): 0.0.0.0 or :: for any of that family, or the
	// address wanted (cp_client.go).
	VIPs []netip.Addr
	// VirtualIPs hands out the addresses a peer's configuration payload
	// asks for (cp.go); nil answers none (no CP in the reply).
	VirtualIPs VirtualIPs
	// EAPRelay returns, for remote auth eap-radius, the relay of the
	// peer's EAP conversation on responder SA sa (eaprelay.go): the
	// caller keeps sa to call its EAPAnswer with what comes back. Without
	// one such peers fail authentication.
	EAPRelay func(sa *SA) EAPRelay
}

// initialContact reports whether our IKE_AUTH request carries
// INITIAL_CONTACT.
func (c *Config) initialContact() bool {
	if c.HasContact == nil || c.RemoteID.IsAny() {
		return false
	}
	return !c.HasContact(c.localIdentity(), c.RemoteID)
}

// ChildConfig is one child of a connection.
type ChildConfig struct {
	// Name is the child's name in the config (a Child made from it
	// carries it).
	Name string
	// Proposals are the ESP proposals; a group in them means PFS on
	// rekey (the first child's keys come from IKE_SA_INIT).
	Proposals         []proposal.Proposal
	LocalTS, RemoteTS []netip.Prefix
	Transport         bool
}

// Retransmit is a retransmission schedule: the n-th retransmission waits
// Timeout * Base^n, and after Tries of them the exchange fails.
type Retransmit struct {
	Timeout time.Duration
	Base    float64
	Tries   int
}

// DefaultRetransmit is strongSwan's retransmission schedule
// (retransmit_timeout 4 s, retransmit_base 1.8, retransmit_tries 5): the
// schedule of a Config whose Retransmit is zero, and the config file's
// default.
var DefaultRetransmit = Retransmit{Timeout: 4 * time.Second, Base: 1.8, Tries: 5}

// DefaultMaxChildren is the default of Config.MaxChildren. A connection
// of one child: while the peer rekeys it the IKE SA holds two until the
// old one is deleted, three after simultaneous rekeys (§2.8.1). One more
// is slack for a peer whose delete is late.
const DefaultMaxChildren = 4

// MinMaxChildren is the least Config.MaxChildren: with fewer, the peer
// could never rekey the child (the old one stays until the new one is
// up).
const MinMaxChildren = 2

// maxChildren is the bound an IKE SA applies: MaxChildren (or its
// default), raised for a connection of several children to their number
// plus DefaultMaxChildren-1, the room one child needs beside itself
// (its rekey, a simultaneous one, a late delete). Both sides rekey one
// child at a time (a window of one), so that is enough for any number.
func (c *Config) maxChildren() int {
	n := c.MaxChildren
	if n == 0 {
		n = DefaultMaxChildren
	}
	return max(n, len(c.childConfigs())+DefaultMaxChildren-1)
}

// childConfigs returns the connection's children: Children, or Child
// alone.
func (c *Config) childConfigs() []ChildConfig {
	if len(c.Children) == 0 {
		return []ChildConfig{c.Child}
	}
	return c.Children
}

// ChildConfig returns the child of the connection named name, or nil.
func (c *Config) ChildConfig(name string) *ChildConfig {
	if len(c.Children) == 0 {
		if c.Child.Name == name {
			return &c.Child
		}
		return nil
	}
	for i := range c.Children {
		if c.Children[i].Name == name {
			return &c.Children[i]
		}
	}
	return nil
}

func (c *Config) retransmit() Retransmit {
	r := c.Retransmit
	if r.Timeout == 0 {
		r = DefaultRetransmit
	}
	return r
}

func (c *Config) rand() io.Reader {
	if c.Rand != nil {
		return c.Rand
	}
	return rand.Reader
}

func (c *Config) randomBytes(n int) ([]byte, error) {
	b := make([]byte, n)
	_, err := io.ReadFull(c.rand(), b)
	return b, err
}

func (c *Config) newSPI() (uint32, error) {
	if c.AllocSPI != nil {
		return c.AllocSPI()
	}
	for {
		b, err := c.randomBytes(4)
		if err != nil {
			return 0, err
		}
		if s := binary.BigEndian.Uint32(b); s >= 256 {
			return s, nil
		}
	}
}

// Validate reports the first thing wrong with c.
func (c *Config) Validate() error {
	switch {
	case len(c.Proposals) == 0:
		return errors.New("ike: no IKE proposals")
	case len(c.Child.Proposals) == 0:
		return errors.New("ike: no ESP proposals")
	case len(c.Child.LocalTS) == 0 || len(c.Child.RemoteTS) == 0:
		return errors.New("ike: local_ts and remote_ts are required")
	case len(c.PSK) == 0 && (c.localAuth() == AuthPSK || c.remoteAuth() == AuthPSK):
		return errors.New("ike: no pre-shared key")
	case c.LocalID.IsAny() && c.localAuth() == AuthPSK:
		return errors.New("ike: a local id is required with auth psk")
	case c.MaxChildren != 0 && c.MaxChildren < MinMaxChildren:
		return fmt.Errorf("ike: MaxChildren %d is below %d: the peer could never rekey the child", c.MaxChildren, MinMaxChildren)
	}
	for _, ch := range c.Children {
		switch {
		case len(ch.Proposals) == 0:
			return fmt.Errorf("ike: child %q: no ESP proposals", ch.Name)
		case len(ch.LocalTS) == 0 || len(ch.RemoteTS) == 0:
			return fmt.Errorf("ike: child %q: local_ts and remote_ts are required", ch.Name)
		}
	}
	return c.validateCerts()
}
