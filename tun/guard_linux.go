package tun

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Guards adds, removes and lists guard routes in the network namespace it
// was opened in. Safe for concurrent use.
type Guards struct {
	nl *rtnl
}

// OpenGuards takes a share of the netlink sockets of the calling thread's
// network namespace (see Open); the Guards keep working there from any
// goroutine.
func OpenGuards() (*Guards, error) {
	nl, err := openRTNL()
	if err != nil {
		return nil, err
	}
	return &Guards{nl: nl}, nil
}

// Close gives up the share of the netlink sockets (the last user closes
// them). The guard routes stay in the kernel.
func (g *Guards) Close() error { return g.nl.close() }

// Add installs gd. A guard that is there already is not an error, and
// neither is another route of the same prefix, table and metric (it is
// left as it is: the guard never replaces a route it did not make).
func (g *Guards) Add(gd Guard) error {
	if guardPriority < 0 {
		return fmt.Errorf("tun: add guard %v: %w", gd, errGuardMetric)
	}
	err := g.nl.do(func(h *netlink.Handle) error { return h.RouteAdd(guardRoute(gd, netlink.SCOPE_UNIVERSE)) })
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("tun: add guard %v: %w", gd, err)
	}
	return nil
}

// Remove deletes gd. A guard that is not there is not an error. Only a
// route with every mark of a guard (type, protocol, metric, table) is
// deleted.
func (g *Guards) Remove(gd Guard) error {
	if guardPriority < 0 {
		return fmt.Errorf("tun: remove guard %v: %w", gd, errGuardMetric)
	}
	err := g.nl.do(func(h *netlink.Handle) error { return h.RouteDel(guardRoute(gd, netlink.SCOPE_NOWHERE)) })
	if err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("tun: remove guard %v: %w", gd, err)
	}
	return nil
}

// listTries bounds the dumps List retries when a route changed while the
// kernel was dumping (NLM_F_DUMP_INTR: the dump may have missed a route).
const listTries = 5

// List returns the guards in every routing table of both families: the
// routes of type unreachable, protocol GuardProto and metric GuardMetric.
func (g *Guards) List() ([]Guard, error) {
	routes, err := g.ours(unix.RTN_UNREACHABLE)
	if err != nil {
		return nil, fmt.Errorf("tun: list guards: %w", err)
	}
	var out []Guard
	for _, r := range routes {
		if gd, ok := parseGuard(r); ok {
			out = append(out, gd)
		}
	}
	return out, nil
}

// ours dumps the routes of type typ and protocol GuardProto in every
// routing table of both families.
func (g *Guards) ours(typ int) ([]netlink.Route, error) {
	var out []netlink.Route
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		var routes []netlink.Route
		err := g.nl.do(func(h *netlink.Handle) (err error) {
			for range listTries {
				// Table RT_TABLE_UNSPEC with RT_FILTER_TABLE: every table.
				routes, err = h.RouteListFiltered(fam,
					&netlink.Route{Table: unix.RT_TABLE_UNSPEC, Protocol: GuardProto, Type: typ},
					netlink.RT_FILTER_TABLE|netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TYPE)
				if !errors.Is(err, netlink.ErrDumpInterrupted) {
					break
				}
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		out = append(out, routes...)
	}
	return out, nil
}

// guardMetric64 is GuardMetric in a variable, so that converting it to int
// is no constant overflow where int has 32 bits.
var guardMetric64 uint64 = GuardMetric

// guardPriority is GuardMetric as the library's Route.Priority, an int; -1
// where int has 32 bits and cannot hold it (the library then sends no
// RTA_PRIORITY at all, and the guard would get metric 0 and win against
// the device's own route: Add and Remove refuse instead).
var guardPriority = func() int {
	if uint64(math.MaxInt) < guardMetric64 {
		return -1
	}
	return int(guardMetric64)
}()

var errGuardMetric = errors.New("metric 4294967295 does not fit github.com/vishvananda/netlink's route priority (an int) on a 32-bit platform")

// guardRoute is gd's route: unreachable, protocol GuardProto, metric
// GuardMetric, in gd's table.
func guardRoute(gd Guard, scope netlink.Scope) *netlink.Route {
	return &netlink.Route{
		Dst:      ipNet(gd.Prefix.Masked()),
		Table:    int(gd.table()),
		Protocol: GuardProto,
		Priority: guardPriority,
		Scope:    scope,
		Type:     unix.RTN_UNREACHABLE,
	}
}

// parseGuard reports whether r, a route of a dump already filtered by
// type and protocol, is a guard, and which.
func parseGuard(r netlink.Route) (Guard, bool) {
	if r.Protocol != GuardProto || r.Type != unix.RTN_UNREACHABLE || uint32(r.Priority) != GuardMetric {
		return Guard{}, false
	}
	p, ok := routePrefix(r)
	if !ok {
		return Guard{}, false
	}
	gd := Guard{Prefix: p}
	if r.Table != unix.RT_TABLE_MAIN {
		gd.Table = uint32(r.Table)
	}
	return gd, true
}

// routePrefix returns the destination of r, a route of a dump.
func routePrefix(r netlink.Route) (netip.Prefix, bool) {
	var p netip.Prefix
	switch {
	case r.Dst != nil:
		a, ok := netip.AddrFromSlice(r.Dst.IP)
		bits, _ := r.Dst.Mask.Size()
		if !ok {
			return netip.Prefix{}, false
		}
		if a.Is4In6() && len(r.Dst.Mask) == net.IPv4len {
			a = a.Unmap()
		}
		p = netip.PrefixFrom(a, bits)
	case r.Family == netlink.FAMILY_V4: // the default route has no RTA_DST
		p = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	case r.Family == netlink.FAMILY_V6:
		p = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	}
	return p, p.IsValid()
}
