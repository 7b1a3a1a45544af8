package ikenode

import (
	"net/netip"
	"slices"

	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/ike/message"
)

// A road warrior's routes (a connection with vips) follow what each
// child negotiated: every prefix of its remote traffic selectors goes
// into the child's interface, with the virtual IP of its family as the
// source, once the child is installed, and goes with the last child that
// holds it. A rekey's new child holds the same prefixes before the old
// one goes (make-before-break, in either direction), so the routes stay
// without a gap; an IKE rekey moves the children and leaves the routes.
// The daemon's stop deletes every IKE SA, and its children's routes go
// with them. The kernel's side (the interface's table, its guards, a
// throw route that keeps the gateway outside a full tunnel) is the
// Router's; the sidecar has none, as its netstack routes every address
// into its NIC.

// Router puts a road warrior's routes into the kernel. AddRoute and
// RemoveRoute are called from the Run goroutine, once per route whatever
// number of children hold it, and must not block for long.
type Router interface {
	AddRoute(r Route) error
	RemoveRoute(r Route) error
}

// Route is one prefix of a child's remote traffic selectors.
type Route struct {
	IfID   uint32       // the child's interface
	Prefix netip.Prefix // routed into it
	// Src is the virtual IP of Prefix's family, the source of what
	// leaves by the route; invalid when the gateway gave none.
	Src netip.Addr
	// Gateway is the IKE peer's address: IKE and ESP go to it, so it
	// must stay outside the tunnel (a Prefix that holds it needs a
	// table of its own, with the gateway thrown back to the main one).
	Gateway netip.Addr
	// Child names the child, for the Router's errors.
	Child string
}

// routeKey is a route as the daemon counts its holders.
type routeKey struct {
	ifID   uint32
	prefix netip.Prefix
}

// routeHold is a route in the kernel and how many children hold it.
type routeHold struct {
	r       Route
	holders int
}

// routeChild routes the remote traffic selectors of child c of x, whose
// SAs went in (rec), when x's connection asks for virtual IPs.
func (m *Daemon) routeChild(x *ikeSA, c *ike.Child, rec *installed) {
	if m.cfg.Router == nil || len(x.conn.cfg.VIPs) == 0 {
		return
	}
	_, peer := x.sa.Addrs()
	vips := x.sa.LocalVirtualIPs()
	for _, p := range routePrefixes(c.RemoteTS) {
		k := routeKey{x.conn.childOf(c).IfID, p}
		if h := m.routes[k]; h != nil {
			h.holders++
			rec.routes = append(rec.routes, k)
			continue
		}
		r := Route{IfID: k.ifID, Prefix: p, Gateway: peer.Addr().Unmap(), Child: c.Name}
		if i := slices.IndexFunc(vips, func(a netip.Addr) bool { return a.Is4() == p.Addr().Is4() }); i >= 0 {
			r.Src = vips[i]
		}
		if err := m.cfg.Router.AddRoute(r); err != nil {
			m.log.WithFields(x.fields()).WithField("child", c.Name).WithField("route", p.String()).WithError(err).
				Error("ike: the child's remote traffic selector cannot be routed into its interface")
			continue
		}
		m.routes[k] = &routeHold{r: r, holders: 1}
		rec.routes = append(rec.routes, k)
		m.log.WithFields(x.fields()).WithFields(map[string]any{"child": c.Name, "route": p.String(), "src": r.Src}).Debug("ike: route added")
	}
}

// unrouteChild lets go of the routes rec held; those no other child
// holds leave the kernel.
func (m *Daemon) unrouteChild(rec *installed) {
	for _, k := range rec.routes {
		h := m.routes[k]
		if h == nil {
			continue
		}
		if h.holders--; h.holders > 0 {
			continue
		}
		delete(m.routes, k)
		if err := m.cfg.Router.RemoveRoute(h.r); err != nil {
			m.log.WithField("child", h.r.Child).WithField("route", k.prefix.String()).WithError(err).Warn("ike: removing the child's route")
		}
	}
	rec.routes = nil
}

// routePrefixes returns the prefixes that together are the addresses of
// the selectors, each once: a route says no protocol or port, which the
// child's SAs hold to.
func routePrefixes(ts []message.Selector) []netip.Prefix {
	var out []netip.Prefix
	for _, t := range ike.SATS(ts) {
		for _, p := range t.Prefixes() {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}
