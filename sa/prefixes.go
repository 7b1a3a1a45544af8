package sa

import "net/netip"

// Prefixes returns the fewest prefixes that together are exactly t's
// addresses, in order (at most two per bit of the address), whatever
// its protocol and ports: what a route to t's addresses takes, since a
// route cannot say a protocol or a port.
func (t TS) Prefixes() []netip.Prefix {
	var ps []netip.Prefix
	t.eachPrefix(func(p netip.Prefix) bool {
		ps = append(ps, p)
		return true
	})
	return ps
}
