package sa

import (
	"net/netip"
	"time"
)

// Dir is the direction of an SA or policy, as ip xfrm names it.
type Dir uint8

const (
	DirIn  Dir = 1 // inbound: packets we open
	DirOut Dir = 2 // outbound: packets we seal
)

func (d Dir) String() string {
	switch d {
	case DirIn:
		return "in"
	case DirOut:
		return "out"
	}
	return "invalid"
}

// Mode is the ESP mode of an SA.
type Mode uint8

const (
	// ModeTunnel carries a whole inner IP packet (next header 4 or 41).
	ModeTunnel Mode = 1
	// ModeTransport carries the payload of an IP packet whose header the
	// outer header stands for: whole datagrams only, never fragments (see
	// the package doc for what it refuses).
	ModeTransport Mode = 2
)

func (m Mode) String() string {
	switch m {
	case ModeTunnel:
		return "tunnel"
	case ModeTransport:
		return "transport"
	}
	return "invalid"
}

// Algorithm is one transform with its key, named as Linux names it:
// "rfc4106(gcm(aes))", "rfc7539esp(chacha20,poly1305)", "cbc(aes)",
// "ecb(cipher_null)", "hmac(sha256)".
type Algorithm struct {
	Name string
	// Key is the key material as ip xfrm takes it: for the AEADs, the
	// cipher key followed by the 4-byte salt.
	Key []byte
	// Bits is icv_bits for an AEAD, trunc_bits for an authentication
	// algorithm; 0 means the default (128).
	Bits int
}

// Encap is ESP in UDP (RFC 3948). A nil *Encap means raw ESP (IP protocol 50).
type Encap struct {
	SrcPort, DstPort uint16
}

// DefaultEncapPort is the port of ESP in UDP (RFC 3948 §3.2, IKE's NAT-T
// port), which the front ends take for a port they are not given.
const DefaultEncapPort = 4500

// Lifetime holds the soft and hard limits of an SA. Zero means no limit.
// Soft expiry raises an event and the SA keeps working; hard expiry stops
// the SA (XfrmInStateExpired / XfrmOutStateExpired).
type Lifetime struct {
	SoftBytes, HardBytes     uint64
	SoftPackets, HardPackets uint64
	SoftAdd, HardAdd         time.Duration // since the SA was added
}

// Selector limits which inner packets an SA or policy covers. A zero
// (invalid) prefix matches every address of either family.
//
// TS, for an SA only, holds a selector that two prefixes cannot say: lists
// of address ranges with protocols and ports, as IKE negotiates them
// (selector.go; NewSelector makes one). Src and Dst are then zero. The
// TSSet is shared and never changed, so Selectors are copied freely; ==
// compares it by identity (policies, which are compared, have none).
type Selector struct {
	Src, Dst netip.Prefix
	TS       *TSSet
}

// Config describes an SA, as `ip xfrm state add` does. It is what the
// config file and the control socket produce and what New consumes.
type Config struct {
	Src, Dst netip.Addr // outer addresses
	SPI      uint32
	Dir      Dir
	Mode     Mode
	IfID     uint32

	// Exactly one of AEAD, or Enc with Auth, is set.
	AEAD *Algorithm
	Enc  *Algorithm
	Auth *Algorithm

	Encap        *Encap
	ReplayWindow uint32 // packets; 0 disables anti-replay (inbound only)
	ESN          bool
	Lifetime     Lifetime
	// Selector restricts the SA to the inner packets it matches; zero
	// means all. Outbound, it picks the SA for what is routed into the
	// interface; inbound, an opened packet whose inner addresses (in
	// transport mode, the rebuilt header's), or with a TSSet protocol
	// and ports, it does not match is dropped (XfrmInStateMismatch, RFC
	// 4301 §5.2).
	Selector Selector
}

// Action is what a policy does with the packets it matches.
type Action uint8

const (
	ActionAllow Action = 1
	ActionBlock Action = 2
)

func (a Action) String() string {
	switch a {
	case ActionAllow:
		return "allow"
	case ActionBlock:
		return "block"
	}
	return "invalid"
}

// String names a selector as ip xfrm does: "src 10.0.0.0/24 dst any";
// a TSSet's lists are written comma-separated, each traffic selector as
// swanctl writes it: "src 10.1.0.0/25,10.1.0.128/25 dst 10.2.0.0/24[tcp/80]".
func (s Selector) String() string {
	if s.TS != nil {
		return "src " + tsListText(s.TS.Src) + " dst " + tsListText(s.TS.Dst)
	}
	return "src " + prefixText(s.Src) + " dst " + prefixText(s.Dst)
}

func prefixText(p netip.Prefix) string {
	if !p.IsValid() {
		return "any"
	}
	return p.String()
}

// Policy is an SPD entry, as `ip xfrm policy add` with an if_id. When an
// interface has policies in a direction, the first one that matches a packet
// decides; a packet no policy matches is blocked (fail closed). When it has
// none, all that is routed into the interface may use its SAs.
type Policy struct {
	Dir      Dir
	IfID     uint32
	Selector Selector
	Action   Action
}

// Redacted returns a copy of c with its algorithms copied and their keys
// removed (nil), for showing c: c's own key bytes are left as they are.
func (c Config) Redacted() Config {
	for _, a := range []**Algorithm{&c.AEAD, &c.Enc, &c.Auth} {
		if *a != nil {
			cp := **a
			cp.Key = nil
			*a = &cp
		}
	}
	return c
}

// ClearKeys zeroes the key bytes of c's algorithms in place (the slices
// stay, zero-filled). An SA made from c holds copies of its own.
func (c *Config) ClearKeys() {
	for _, a := range []*Algorithm{c.AEAD, c.Enc, c.Auth} {
		if a != nil {
			clear(a.Key)
		}
	}
}
