package tun

import (
	"fmt"
	"net/netip"
)

// A road warrior's full tunnel (a child whose remote traffic selector is
// 0.0.0.0/0 or ::/0) goes into a routing table of its own, reached by a
// routing rule, as strongSwan's table 220 is: the main table keeps the
// host's default route, and the gateway's own address is thrown back to
// it (a throw route), so that IKE and ESP to the gateway never enter the
// tunnel they carry. Rules and throw routes carry GuardProto as guards
// do, which is how a start after a crash finds those a previous run left
// (Rules, Throws) and cleans them.

// Rule is a routing rule: `ip rule add priority P [not fwmark M] lookup
// T protocol 90`, of one family. With NotMark, packets that carry the
// mark (the underlay's sockets' SO_MARK) skip it.
type Rule struct {
	IPv6     bool
	Priority uint32
	Table    uint32
	NotMark  uint32 // 0: every packet
}

// String is the rule as `ip rule` takes it.
func (r Rule) String() string {
	s := "ip rule"
	if r.IPv6 {
		s = "ip -6 rule"
	}
	s += fmt.Sprintf(" priority %d", r.Priority)
	if r.NotMark != 0 {
		s += fmt.Sprintf(" not fwmark %#x", r.NotMark)
	}
	return s + fmt.Sprintf(" lookup %d proto %d", r.Table, GuardProto)
}

// Throw is a throw route: a lookup in Table for an address in Prefix
// ends there and goes on with the next rule (the main table), as if
// Table had no route of it.
type Throw struct {
	Table  uint32
	Prefix netip.Prefix
}

// String is the route as `ip route` prints it.
func (th Throw) String() string {
	return fmt.Sprintf("throw %v table %d proto %d", th.Prefix, th.Table, GuardProto)
}
