package ike

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/ipsecd/ipsecd/ike/message"
)

// Configuration payloads (RFC 7296 §3.15), the responder's side: a peer's
// CFG_REQUEST in IKE_AUTH gets virtual IPs from Config.VirtualIPs (the
// daemon's pools), a CFG_REPLY with them and what the pool tells beside
// them (DNS servers, subnets, RFC 8598 DNS domains), and the first
// child's selectors on the peer's side narrowed to them. The SA holds its
// leases while it lives and releases them when it ends; an IKE rekey
// hands them to the SA that replaces it.

// VirtualIPs hands out the addresses peers ask for in their CFG_REQUEST:
// the daemon's address pools (package pool) behind it. It must be safe
// for concurrent use if SAs of several goroutines share it.
type VirtualIPs interface {
	// Acquire leases identity an address of requested's family
	// (0.0.0.0 or :: for any, or the address the peer asks for again)
	// for an IKE SA with peer; its error says why none is left (a pool
	// exhausted, named).
	Acquire(identity string, requested netip.Addr, peer netip.AddrPort) (Lease, error)
	// Release ends a lease: its IKE SA is gone.
	Release(Lease)
}

// Lease is a virtual IP handed out, and what the peer is told with it.
type Lease struct {
	Addr     netip.Addr
	Identity string // whose it is: the EAP identity, else the IKE identity
	Pool     string
	DNS      []netip.Addr
	Subnets  []netip.Prefix
	Domains  []string // RFC 8598's INTERNAL_DNS_DOMAIN
	// Assigned: the address is an AAA server's (AssignedVirtualIPs),
	// not the pool's.
	Assigned bool
}

// ErrAddressFailure is wrapped by the error of an IKE_AUTH whose
// CFG_REQUEST got no address: the peer was answered
// INTERNAL_ADDRESS_FAILURE and no child (§3.10.1); its IKE SA is up.
var ErrAddressFailure = errors.New("ike: no virtual IP for the peer")

// VirtualIPs returns the addresses leased to the peer (as responder).
func (s *SA) VirtualIPs() []netip.Addr {
	var out []netip.Addr
	for _, l := range s.leases {
		out = append(out, l.Addr)
	}
	return out
}

// answerCP acquires the addresses a CFG_REQUEST among ps asks for,
// for identity, and returns the CFG_REPLY; no payload when there is no
// request (or no VirtualIPs to answer it). An error, wrapping
// ErrAddressFailure, means the peer asked and got nothing.
func (s *SA) answerCP(ps []message.Payload, identity string) ([]message.Payload, error) {
	body := message.Get(ps, message.TypeCP)
	if body == nil || s.cfg.VirtualIPs == nil {
		return nil, nil
	}
	cp := message.CP(body)
	attrs, err := cp.Attributes()
	if err != nil || cp.Type() != message.CFGRequest {
		return nil, nil // §3.15: a CP we cannot read is ignored
	}
	var errs []error
	asked := 0
	for _, a := range attrs {
		if a.Type != message.InternalIP4Address && a.Type != message.InternalIP6Address {
			continue
		}
		want := netip.IPv4Unspecified()
		if a.Type == message.InternalIP6Address {
			want = netip.IPv6Unspecified()
		}
		if v, ok := a.Addr(); ok {
			want = v
		}
		if slices.ContainsFunc(s.leases, func(l Lease) bool { return l.Addr.Is4() == want.Is4() }) {
			continue // one address a family
		}
		asked++
		l, assigned, err := s.assignedLease(identity, want) // eaprelay.go
		if !assigned {
			l, err = s.cfg.VirtualIPs.Acquire(identity, want, s.remote)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s.leases = append(s.leases, l)
	}
	if asked > 0 && len(s.leases) == 0 {
		return nil, fmt.Errorf("%w: %w", ErrAddressFailure, errors.Join(errs...))
	}
	return []message.Payload{{Type: message.TypeCP, Body: message.AppendCP(nil, message.CFGReply, s.replyAttributes())}}, nil
}

// replyAttributes are the CFG_REPLY's: each lease's address, then the
// DNS servers, subnets and domains of the leases, each once.
func (s *SA) replyAttributes() []message.CPAttribute {
	var attrs []message.CPAttribute
	add := func(a message.CPAttribute) {
		if !slices.ContainsFunc(attrs, func(b message.CPAttribute) bool { return a.Type == b.Type && string(a.Value) == string(b.Value) }) {
			attrs = append(attrs, a)
		}
	}
	for _, l := range s.leases {
		t := message.InternalIP4Address
		if l.Addr.Is6() {
			t = message.InternalIP6Address
		}
		add(message.AddrAttribute(t, l.Addr))
	}
	for _, l := range s.leases {
		for _, d := range l.DNS {
			t := message.InternalIP4DNS
			if d.Is6() {
				t = message.InternalIP6DNS
			}
			add(message.AddrAttribute(t, d))
		}
		for _, p := range l.Subnets {
			add(message.SubnetAttribute(p))
		}
		for _, d := range l.Domains {
			add(message.CPAttribute{Type: message.InternalDNSDomain, Value: []byte(d)})
		}
	}
	return attrs
}

// vipSelectors are the selectors of the leases' addresses, each alone:
// what the peer's side of its first child narrows to.
func (s *SA) vipSelectors() []message.Selector {
	var out []message.Selector
	for _, l := range s.leases {
		out = append(out, prefixSelectors([]netip.Prefix{netip.PrefixFrom(l.Addr, l.Addr.BitLen())})...)
	}
	return out
}

// ReleaseLeases gives the SA's leases back before it ends, once: the
// daemon calls it when it replaced the SA (unique = replace) and
// removed its children, so that the peer's new SA gets the same
// addresses. VirtualIPs still lists them.
func (s *SA) ReleaseLeases() { s.releaseLeases() }

// releaseLeases gives the SA's leases back (it ended), once; VirtualIPs
// still lists them, for the events that say it ended.
func (s *SA) releaseLeases() {
	if s.released {
		return
	}
	for _, l := range s.leases {
		s.cfg.VirtualIPs.Release(l)
	}
	s.released = true
}
