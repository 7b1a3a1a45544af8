package ike

import (
	"net/netip"
	"slices"

	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/sa"
)

// Traffic selectors (RFC 7296 §2.9). Configured selectors are prefixes of
// any protocol and port; what travels is address ranges.

func prefixSelectors(ps []netip.Prefix) []message.Selector {
	out := make([]message.Selector, 0, len(ps))
	for _, p := range ps {
		t := sa.PrefixTS(p)
		out = append(out, message.Selector{Start: t.Start, End: t.End, StartPort: t.StartPort, EndPort: t.EndPort})
	}
	return out
}

// intersect returns the selector both a and b allow, and false when they
// have nothing in common.
func intersect(a, b message.Selector) (message.Selector, bool) {
	if a.Start.Is4() != b.Start.Is4() {
		return message.Selector{}, false
	}
	r := message.Selector{Proto: a.Proto}
	switch {
	case a.Proto == 0:
		r.Proto = b.Proto
	case b.Proto != 0 && a.Proto != b.Proto:
		return r, false
	}
	r.StartPort, r.EndPort = max(a.StartPort, b.StartPort), min(a.EndPort, b.EndPort)
	r.Start, r.End = maxAddr(a.Start, b.Start), minAddr(a.End, b.End)
	if r.StartPort > r.EndPort || r.Start.Compare(r.End) > 0 {
		return r, false
	}
	return r, true
}

func maxAddr(a, b netip.Addr) netip.Addr {
	if a.Compare(b) >= 0 {
		return a
	}
	return b
}

func minAddr(a, b netip.Addr) netip.Addr {
	if a.Compare(b) <= 0 {
		return a
	}
	return b
}

// maxSelectors is the most selectors a TS payload holds: it counts them
// in one byte.
const maxSelectors = 255

// narrow returns, for a responder, the part of the peer's offer that its
// policy allows: every non-empty intersection of an offered selector with
// a configured one, each once. An empty result means TS_UNACCEPTABLE; so
// does one of more than maxSelectors, which no answer could carry (255
// offered selectors against two configured prefixes make up to 510).
func narrow(offered, policy []message.Selector) []message.Selector {
	var out []message.Selector
	for _, o := range offered {
		for _, p := range policy {
			r, ok := intersect(o, p)
			if !ok || slices.Contains(out, r) {
				continue
			}
			if len(out) == maxSelectors {
				return nil
			}
			out = append(out, r)
		}
	}
	return out
}

// SATS converts IKE's traffic selectors to the SAD's, field by field:
// the one conversion between the two.
func SATS(ss []message.Selector) []sa.TS {
	out := make([]sa.TS, len(ss))
	for i, s := range ss {
		out[i] = sa.TS{Start: s.Start, End: s.End, Proto: s.Proto, StartPort: s.StartPort, EndPort: s.EndPort}
	}
	return out
}

// installable reports whether the SAD can hold a child's narrowed
// selectors exactly (sa.NewSelector: at most sa.MaxTS selectors and
// sa.MaxTSPrefixes prefixes a side). A responder refuses what it cannot
// with TS_UNACCEPTABLE, rather than agree to it and delete the child
// when its install fails.
func installable(local, remote []message.Selector) bool {
	_, err := sa.NewSelector(SATS(local), SATS(remote))
	return err == nil
}

// within reports whether every selector of got lies inside one of sent:
// an initiator accepts a narrowed answer, never a widened one.
func within(got, sent []message.Selector) bool {
	for _, g := range got {
		ok := false
		for _, s := range sent {
			if r, in := intersect(g, s); in && r == g {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return len(got) > 0
}
