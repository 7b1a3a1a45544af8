package tun

import (
	"fmt"
	"math"
	"net/netip"
)

// A guard is a route that keeps cleartext off the wire while a prefix's
// TUN device is missing: an `unreachable` route of the same prefix with the
// worst metric there is. While the device is up, its own route (metric 0,
// or 1024 for IPv6) wins; once the device is gone (the daemon was killed,
// and the kernel removed the device and its routes with the last open
// file), the guard is the most specific route left, and the kernel refuses
// the packets (EHOSTUNREACH to a local sender, ICMP unreachable to a
// forwarded one) instead of sending them by a less specific route, such
// as the default route, in clear. Guards outlive the process: the next
// start finds them by their marks (GuardProto, GuardMetric, type
// unreachable) and adopts or removes them.
const (
	// GuardProto is the routing protocol number (rtm_protocol) of guard
	// routes: `ip route show table all proto 90` lists them. It is not in
	// iproute2's rt_protos list of assigned numbers.
	GuardProto = 90
	// GuardMetric is the guards' metric: the worst, so that a guard
	// never wins against any other route of its prefix and table,
	// whoever made it.
	GuardMetric = math.MaxUint32
)

// Guard is one guard route: a prefix in a routing table.
type Guard struct {
	Table  uint32 // routing table; 0 is the main table (254)
	Prefix netip.Prefix
}

func (gd Guard) table() uint32 {
	if gd.Table == 0 {
		return 254 // RT_TABLE_MAIN
	}
	return gd.Table
}

// String is the route as `ip route` prints it.
func (gd Guard) String() string {
	s := fmt.Sprintf("unreachable %v proto %d metric %d", gd.Prefix, GuardProto, uint32(GuardMetric))
	if gd.Table != 0 && gd.Table != 254 {
		s += fmt.Sprintf(" table %d", gd.Table)
	}
	return s
}
