package control

import (
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// IKEBackend is what a Backend adds when the daemon runs IKE: the
// commands of `ipsecd ike`. A Backend without it answers them with
// ErrNoIKE, an ErrInvalid. Its errors carry the codes the
// client tells apart: ErrNotFound for a connection or child it does not
// have, ErrInvalid for an action the state refuses.
type IKEBackend interface {
	IKEList() ([]IKESAInfo, error)
	IKEInitiate(t IKETarget) error
	IKETerminate(t IKETarget) error
	IKERekey(t IKETarget) error
}

// IKETarget names what an ike action acts on: a connection, its IKE SA
// with its children (IKE), or one child (Child); one of the two is set.
type IKETarget struct {
	IKE, Child string
}

// IKESAInfo is one IKE SA as ike.list answers it and `ipsecd ike list`
// shows it (swanctl --list-sas's fields).
type IKESAInfo struct {
	Name      string `json:"name"`
	State     string `json:"state"` // CONNECTING, ESTABLISHED, REKEYED, DELETING
	Initiator bool   `json:"initiator"`
	// SPIs in hex, the initiator's first.
	SPIInitiator string         `json:"spi_i"`
	SPIResponder string         `json:"spi_r"`
	Local        netip.AddrPort `json:"local"`
	Remote       netip.AddrPort `json:"remote"`
	LocalID      string         `json:"local_id"`
	RemoteID     string         `json:"remote_id"`
	Algorithms   string         `json:"algorithms"`
	// KeyExchanges are the key exchange methods that made the IKE SA's
	// keys, as swanctl --list-sas --raw names them: "dh-group=CURVE_25519",
	// then one "akeN=ML_KEM_768" per additional exchange (RFC 9370).
	KeyExchanges []string  `json:"key_exchanges,omitempty"`
	NAT          bool      `json:"nat"`
	Established  time.Time `json:"established,omitzero"`
	// RemoteEAPID is the EAP identity the peer proved (escaped), and
	// RemoteVIPs the virtual IPs it was given.
	RemoteEAPID string `json:"remote_eap_id,omitempty"`
	// RemoteAuth is how the peer authenticated, as the config writes it
	// (psk, pubkey, eap-mschapv2, eap-md5, eap-tls, eap-radius, or eap for
	// a gateway that proved itself by EAP alone); "" before it did.
	RemoteAuth string   `json:"remote_auth,omitempty"`
	RemoteVIPs []string `json:"remote_vips,omitempty"`
	// LocalVIPs are the virtual IPs the gateway gave us (vips), with the
	// DNS servers and domains (escaped) it named.
	LocalVIPs  []string `json:"local_vips,omitempty"`
	DNS        []string `json:"dns,omitempty"`
	DNSDomains []string `json:"dns_domains,omitempty"`
	// RekeyIn and ExpiresIn are seconds from now (0: not scheduled).
	RekeyIn   int64          `json:"rekey_in"`
	ExpiresIn int64          `json:"expires_in"`
	Children  []IKEChildInfo `json:"children"`
}

// IKEChildInfo is one CHILD_SA pair of an IKE SA.
type IKEChildInfo struct {
	Name       string    `json:"name"`
	State      string    `json:"state"` // INSTALLED, or REKEYING: the outbound SA waits for the peer's delete
	Mode       string    `json:"mode"`
	IfID       uint32    `json:"if_id"`
	Encap      bool      `json:"encap"`
	SPIIn      string    `json:"spi_in"`
	SPIOut     string    `json:"spi_out"`
	Algorithms string    `json:"algorithms"`
	LocalTS    []string  `json:"local_ts"`
	RemoteTS   []string  `json:"remote_ts"`
	BytesIn    uint64    `json:"bytes_in"`
	PacketsIn  uint64    `json:"packets_in"`
	BytesOut   uint64    `json:"bytes_out"`
	PacketsOut uint64    `json:"packets_out"`
	Installed  time.Time `json:"installed"`
	RekeyIn    int64     `json:"rekey_in"`
	ExpiresIn  int64     `json:"expires_in"`
}

// ErrNoIKE answers the ike commands of a daemon that runs no IKE: a
// Backend without IKEBackend, or one whose config has no connections.
// It wraps ErrInvalid; add a connection to the config and reload.
var ErrNoIKE = fmt.Errorf("%w: IKE is not running (the config has no connections)", ErrInvalid)

// dispatchIKE answers the ike.* requests: list, and initiate, terminate
// and rekey of one connection ("ike") or child ("child").
func (s *Server) dispatchIKE(req *Request) (any, error) {
	b, ok := s.backend.(IKEBackend)
	if !ok {
		return nil, ErrNoIKE
	}
	if req.Cmd == "ike.list" {
		l, err := b.IKEList()
		return nonNil(l), err
	}
	if (req.IKE == "") == (req.Child == "") {
		return nil, invalid(errors.New(`want one of "ike" (a connection's name) and "child" (a child's name)`))
	}
	t := IKETarget{IKE: req.IKE, Child: req.Child}
	var err error
	switch req.Cmd {
	case "ike.initiate":
		err = b.IKEInitiate(t)
	case "ike.terminate":
		err = b.IKETerminate(t)
	case "ike.rekey":
		err = b.IKERekey(t)
	}
	return nil, err
}

// IKEList returns the IKE SAs and their children.
func (c *Client) IKEList() ([]IKESAInfo, error) {
	var out []IKESAInfo
	err := c.call(Request{Cmd: "ike.list"}, &out)
	return out, err
}

// IKEAction runs ike.initiate, ike.terminate or ike.rekey (cmd) on a
// connection or a child.
func (c *Client) IKEAction(cmd string, t IKETarget) error {
	return c.call(Request{Cmd: cmd, IKE: t.IKE, Child: t.Child}, nil)
}
