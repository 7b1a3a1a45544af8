package config

import (
	"crypto"
	"crypto/x509"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/ike/proposal"
)

// Defaults of the ike: and connections: keys, as strongSwan's swanctl.conf
// has them where it has the key.
const (
	DefaultIKEPort         = 500
	DefaultIKERekeyTime    = 4 * time.Hour
	DefaultChildRekeyTime  = time.Hour
	DefaultCookieThreshold = ike.DefaultCookieThreshold
	// DefaultBlockThreshold and DefaultInitLimitHalfOpen bound the
	// half-open IKE SAs from one address (strongSwan's block_threshold
	// and its default) and in all (strongSwan's init_limit_half_open,
	// which strongSwan leaves unlimited).
	DefaultBlockThreshold    = 5
	DefaultInitLimitHalfOpen = 1000
	DefaultMaxChildren       = ike.DefaultMaxChildren
	// DefaultMaxIKESAsPerPeer bounds the IKE SAs of one connection with
	// one peer identity; MinMaxIKESAsPerPeer is the least that lets
	// simultaneous IKE rekeys complete (the old SA and two new ones).
	DefaultMaxIKESAsPerPeer = 5
	MinMaxIKESAsPerPeer     = 3
	// maxPEMFile bounds a certificate or private key file: a chain of a
	// few RSA-4096 certificates takes some 10 KiB.
	maxPEMFile = 1 << 20
)

// IKEConfig is what the ike:, connections: and secrets: sections of the
// file say, in swanctl.conf's vocabulary. It holds pre-shared keys and
// private keys: print it with String, never with its fields. Config
// embeds it.
type IKEConfig struct {
	IKE         IKE
	Connections []Connection
	Secrets     []Secret
	Pools       []Pool     // pools: (pools.go)
	EAPRADIUS   *EAPRADIUS // eap_radius: (eapradius.go), nil without
}

// IKE is the ike: section: settings of the daemon's one IKE responder and
// initiator, shared by all connections.
type IKE struct {
	Port       uint16 // UDP port of IKE_SA_INIT; NAT-T moves to underlay.udp's
	Retransmit ike.Retransmit
	// CookieThreshold is the number of half-open IKE SAs at which
	// cookies are asked (RFC 7296 §2.6); 0 asks them always. See Cookies.
	CookieThreshold int
	// BlockThreshold is the number of half-open IKE SAs from one
	// address past which its IKE_SA_INIT requests are dropped, cookie
	// or not (strongSwan's block_threshold); InitLimitHalfOpen the same
	// for all addresses together (init_limit_half_open). 0: no limit.
	BlockThreshold, InitLimitHalfOpen int
	// MaxChildren bounds the CHILD_SAs one IKE SA holds
	// (ike.Config.MaxChildren).
	MaxChildren int
	// MaxIKESAsPerPeer bounds the established IKE SAs of one connection
	// with one peer identity: past it the oldest go. 0: no limit.
	MaxIKESAsPerPeer int
	// Keylog is the path prefix of the Wireshark key files, "" for none.
	// Debug only: whoever reads them decrypts the traffic.
	Keylog string
	// ResolveFile is the resolv.conf-format file that gets the DNS
	// servers and domains our gateways give (strongSwan's resolve
	// plugin's file), "" for none.
	ResolveFile string
}

// CookieSetting returns CookieThreshold as ike.Cookies.Threshold takes it,
// where 0 means the default and a negative value always.
func (i IKE) CookieSetting() int {
	if i.CookieThreshold == 0 {
		return -1
	}
	return i.CookieThreshold
}

// Connection is one item of connections: (swanctl's connections.<name>).
type Connection struct {
	Name    string
	Version int // always 2
	// LocalAddrs and RemoteAddrs are the addresses the IKE SA runs
	// between; empty means %any (swanctl's default). A RemoteAddrs with
	// %any and addresses accepts any initiator and initiates to the
	// addresses.
	LocalAddrs, RemoteAddrs []netip.Addr
	LocalAny, RemoteAny     bool
	// Pools are the names of the pools whose addresses a gateway
	// hands this connection's clients, the first with one left of the
	// family asked for; VIPs the virtual IPs a client asks for
	// (0.0.0.0 or :: for any of that family).
	Pools     []string
	VIPs      []netip.Addr
	Proposals []proposal.Proposal
	// AllowLegacy lets proposals name legacy algorithms (modp1024) that
	// no preset asks for (allow_legacy: true).
	AllowLegacy bool
	Encap       bool          // force ESP in UDP (swanctl's encap = yes)
	DPDDelay    time.Duration // 0: no liveness checks
	RekeyTime   time.Duration // of the IKE SA
	// Unique is swanctl's unique: what a peer's new IKE SA does to the
	// other IKE SAs of its identity.
	Unique        Unique
	Local, Remote Endpoint
	Children      []Child
	// PSK is the secret of secrets: that serves the connection (shares
	// its bytes with that Secret), when either side uses psk.
	PSK  Key
	Line int // where it is in the file
}

// Endpoint is a connection's local: or remote: (swanctl's local/remote
// sections).
type Endpoint struct {
	Auth ike.AuthClass
	ID   string // as swanctl writes ids; "" with pubkey is the certificate's subject (local) or %any (remote)
	// Identity is ID parsed (ike.ParseIdentity), once, when the file is
	// read: what the engine sends and compares.
	Identity ike.Identity
	// Cert and Key are the paths of local's certificate (then its chain)
	// and its private key; CACerts the paths of remote's trust anchors.
	Cert, Key string
	CACerts   []string
	// PeerCerts are the paths of remote's certs: the peer's certificates,
	// pinned (the engine's PeerCerts); Certs holds them.
	PeerCerts []string
	// EAPID is eap_id with auth eap-*: remote's is the one EAP identity
	// admitted, "" (%any) every user of an eap secret; local's is ours
	// as a client, "" the id's text.
	EAPID string
	// What the files hold.
	Certs      []*x509.Certificate
	PrivateKey crypto.Signer
	CACertList []*x509.Certificate
}

// String describes e without its private key.
func (e Endpoint) String() string {
	s := fmt.Sprintf("{auth: %s, id: %q", e.Auth, e.ID)
	if e.Cert != "" {
		s += ", cert: " + e.Cert
	}
	if e.Key != "" {
		s += ", key: " + e.Key
	}
	if len(e.CACerts) > 0 {
		s += fmt.Sprintf(", cacerts: %v", e.CACerts)
	}
	if len(e.PeerCerts) > 0 {
		s += fmt.Sprintf(", certs: %v", e.PeerCerts)
	}
	if e.EAPID != "" {
		s += fmt.Sprintf(", eap_id: %q", e.EAPID)
	}
	return s + "}"
}

// GoString is String, so that %#v does not print the private key either.
func (e Endpoint) GoString() string { return e.String() }

// Child is one item of a connection's children: (swanctl's children.<name>).
type Child struct {
	Name              string
	IfID              uint32 // the interface whose traffic it carries
	Transport         bool   // mode transport; tunnel otherwise
	LocalTS, RemoteTS []netip.Prefix
	// RemoteDynamic: remote_ts has dynamic, the clients' virtual IPs
	// (the connection's pools), whose prefixes RemoteTS holds too.
	RemoteDynamic bool
	// LocalDynamic: local_ts has dynamic, our virtual IPs (the
	// connection's vips): LocalTS holds 0.0.0.0/0 and ::/0 for their
	// families, which the gateway narrows to the addresses it gives.
	LocalDynamic bool
	ESPProposals []proposal.Proposal
	RekeyTime    time.Duration
	LifeTime     time.Duration // hard expiry; RekeyTime * 1.1 by default, as swanctl
	ReplayWindow uint32
	StartAction  StartAction
	DPDAction    DPDAction
	Line         int
}

// Unique is a connection's unique (swanctl's uniqueness policy): what
// happens to the other IKE SAs of a peer's identity when it
// authenticates. The identity is its EAP identity with EAP, else its IKE
// identity, towards the same local identity, over the same address
// family, on the same connection.
type Unique string

// The values of unique.
const (
	// UniqueNo (the default): a peer's INITIAL_CONTACT drops the other
	// IKE SAs of its identity (the same EAP identity with EAP), whose
	// peer restarted; as an initiator we send INITIAL_CONTACT when we
	// hold no IKE SA with the peer.
	UniqueNo Unique = "no"
	// UniqueNever: INITIAL_CONTACT is neither acted on nor sent, so
	// that clients sharing an identity (one group PSK) all stay up.
	UniqueNever Unique = "never"
	// UniqueKeep: a new IKE SA of an identity that holds one is refused
	// with AUTHENTICATION_FAILED, unless it carries INITIAL_CONTACT
	// (which drops the old one, as with no).
	UniqueKeep Unique = "keep"
	// UniqueReplace: a new IKE SA of an identity that holds one
	// replaces it: the old one is deleted (with a Delete to its peer,
	// none after INITIAL_CONTACT) and its virtual IPs go to the new one.
	UniqueReplace Unique = "replace"
)

// StartAction is a child's start_action (swanctl's): what the daemon
// does with the child when the config is loaded.
type StartAction string

// The values of start_action.
const (
	StartActionNone  StartAction = "none"  // nothing: the peer initiates (the default)
	StartActionStart StartAction = "start" // initiate it, and again after a failed attempt
	StartActionTrap  StartAction = "trap"  // install its trap policy: traffic initiates it
)

// DPDAction is a child's dpd_action (swanctl's): what the daemon does
// with the child when the peer stopped answering.
type DPDAction string

// The values of dpd_action.
const (
	DPDActionClear   DPDAction = "clear"   // nothing: the child is gone (the default)
	DPDActionRestart DPDAction = "restart" // initiate it again
	DPDActionTrap    DPDAction = "trap"    // install its trap policy: traffic initiates it again
)

// Secret is one item of secrets: (swanctl's secrets.ike<suffix>, or
// secrets.eap<suffix> with Type SecretEAP).
type Secret struct {
	Type SecretType
	IDs  []string // empty: any (an EAP secret needs them)
	// Identities are IDs parsed (ike.ParseIdentity), in the same order:
	// what a connection's ids are compared with; none for an EAP
	// secret, whose ids are EAP identities, compared as they are.
	Identities []ike.Identity
	Secret     Key
	Line       int
}

// SecretType is a secret's type: what it authenticates.
type SecretType string

// The values of a secret's type.
const (
	SecretIKE SecretType = "ike" // a pre-shared key of IKE (auth psk); the default
	SecretEAP SecretType = "eap" // a user's EAP password (EAP-MSCHAPv2, EAP-MD5)
)

// Key is key material (a pre-shared key). It formats as "(key not shown)"
// with every verb.
type Key []byte

// Format keeps k out of every fmt verb.
func (k Key) Format(f fmt.State, verb rune) { fmt.Fprint(f, "(key not shown)") }

// wipe zeroes the key material of c. The ike.Configs made from it hold
// copies of their own.
func (c *IKEConfig) wipe() {
	for i := range c.Secrets {
		clear(c.Secrets[i].Secret)
	}
	for i := range c.Connections {
		clear(c.Connections[i].PSK)
		c.Connections[i].Local.PrivateKey = nil // cannot be zeroed; dropped
	}
	c.EAPRADIUS.wipe()
}

// redacted returns a copy of c without keys: no secret, no PSK, no
// private key.
func (c IKEConfig) redacted() IKEConfig {
	r := c
	r.Secrets = make([]Secret, len(c.Secrets))
	for i, s := range c.Secrets {
		s.Secret = nil
		r.Secrets[i] = s
	}
	r.Connections = make([]Connection, len(c.Connections))
	for i, cn := range c.Connections {
		cn.PSK = nil
		cn.Local.PrivateKey = nil
		r.Connections[i] = cn
	}
	r.EAPRADIUS = c.EAPRADIUS.redacted()
	return r
}

// Connection returns the connection named name, or nil.
func (c *IKEConfig) Connection(name string) *Connection {
	for i := range c.Connections {
		if c.Connections[i].Name == name {
			return &c.Connections[i]
		}
	}
	return nil
}

// String describes c in the shape of the file, without keys.
func (c *IKEConfig) String() string {
	var b strings.Builder
	if len(c.Connections) == 0 && len(c.Secrets) == 0 && len(c.Pools) == 0 {
		return ""
	}
	for _, p := range c.Pools {
		fmt.Fprintf(&b, "pool %s addrs %s (%d addresses) dns %v split_include %v dns_domains %q\n",
			p.Name, p.Addrs, p.Addrs.Size, p.DNS, p.SplitInclude, p.DNSDomains)
	}
	fmt.Fprintf(&b, "ike: {port: %d, retransmit: {timeout: %s, base: %g, tries: %d}, cookie_threshold: %d, block_threshold: %d, init_limit_half_open: %d, max_children: %d, max_ike_sas_per_peer: %d, keylog: %q}\n",
		c.IKE.Port, c.IKE.Retransmit.Timeout, c.IKE.Retransmit.Base, c.IKE.Retransmit.Tries, c.IKE.CookieThreshold,
		c.IKE.BlockThreshold, c.IKE.InitLimitHalfOpen, c.IKE.MaxChildren, c.IKE.MaxIKESAsPerPeer, c.IKE.Keylog)
	for _, cn := range c.Connections {
		fmt.Fprintf(&b, "connection %s version %d local_addrs %s remote_addrs %s proposals %v allow_legacy %t encap %t dpd_delay %s rekey_time %s unique %s local %s remote %s\n",
			cn.Name, cn.Version, addrList(cn.LocalAddrs, cn.LocalAny), addrList(cn.RemoteAddrs, cn.RemoteAny),
			cn.Proposals, cn.AllowLegacy, cn.Encap, cn.DPDDelay, cn.RekeyTime, cn.Unique, cn.Local, cn.Remote)
		if len(cn.Pools) > 0 || len(cn.VIPs) > 0 {
			fmt.Fprintf(&b, "  pools %v vips %v\n", cn.Pools, cn.VIPs)
		}
		for _, ch := range cn.Children {
			mode := "tunnel"
			if ch.Transport {
				mode = "transport"
			}
			fmt.Fprintf(&b, "  child %s if_id %d mode %s local_ts %v remote_ts %v esp_proposals %v rekey_time %s life_time %s replay_window %d start_action %s dpd_action %s\n",
				ch.Name, ch.IfID, mode, ch.LocalTS, ch.RemoteTS, ch.ESPProposals, ch.RekeyTime, ch.LifeTime, ch.ReplayWindow, ch.StartAction, ch.DPDAction)
		}
	}
	for _, s := range c.Secrets {
		if s.Type == SecretEAP {
			b.WriteString("secret type eap ")
		} else {
			b.WriteString("secret ")
		}
		fmt.Fprintf(&b, "ids %v (secret not shown)\n", s.IDs)
	}
	return b.String()
}

// summary is what Config.Summary adds for the IKE sections: nothing
// without connections.
func (c *IKEConfig) summary() string {
	if len(c.Connections) == 0 {
		if len(c.Pools) > 0 {
			return fmt.Sprintf(", %d pools", len(c.Pools))
		}
		return ""
	}
	n := 0
	for _, cn := range c.Connections {
		n += len(cn.Children)
	}
	s := fmt.Sprintf(", %d connections, %d children, %d secrets", len(c.Connections), n, len(c.Secrets))
	if len(c.Pools) > 0 {
		s += fmt.Sprintf(", %d pools", len(c.Pools))
	}
	return s
}

func addrList(as []netip.Addr, any bool) string {
	var ss []string
	if any {
		ss = append(ss, "%any")
	}
	for _, a := range as {
		ss = append(ss, a.String())
	}
	return "[" + strings.Join(ss, ", ") + "]"
}
