package tun

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// rtnl is one user's (a Device's, a Guards') share of the NETLINK_ROUTE
// handles (github.com/vishvananda/netlink) of the network namespace of the
// thread that opened it; it keeps working there whatever thread uses it
// later. Safe for concurrent use; after close every method returns
// ErrClosed.
type rtnl struct {
	ns *nsHandles
	// mu guards: h (nil once closed). Read-locked for a request, so that
	// close waits for the user's requests in flight: a netlink.Handle
	// without sockets would open a new one in the calling thread's
	// namespace, which may be another.
	mu sync.RWMutex
	h  *netlink.Handle
}

// handlesPerNS is how many netlink sockets the users in one namespace
// share. One socket per Device cost a second descriptor per interface
// (10,000 interfaces hit a hard limit of 20,000 descriptors). Fewer than
// the goroutines that remove devices at once slows removal: a handle
// serialises its requests, and a removal waits for RCU grace periods in
// its request (200 devices closed by 32 goroutines: 230-340 ms with a
// socket each, 470-750 ms with 16 shared, 280-400 ms with 64).
const handlesPerNS = 64

// nsHandles are the shared handles of one network namespace. They hold a
// reference to it, so its identity (device and inode of its nsfs file)
// is not reused while they are open.
type nsHandles struct {
	id   nsID
	hs   []*netlink.Handle // up to handlesPerNS, opened as users come
	next int               // the handle the next user gets
	refs int               // users
	// raw is a socket of the namespace for the requests the library
	// cannot make: a new link's settings in one message (setup), and
	// the removal of a group of links (CloseAll).
	raw *nl.SocketHandle
	// group is the link group of the Devices opened here (setup), random
	// per process and namespace.
	group uint32
	// groupMu guards: grouped, the Devices in group not yet closed. It
	// is held while a link joins the group and while the group is
	// removed, so that a removal takes no link that nobody asked to
	// close.
	groupMu sync.Mutex
	grouped int
}

type nsID struct{ dev, ino uint64 }

// namespaces is the registry of shared handles.
var namespaces struct {
	// mu guards: byID and every nsHandles in it.
	mu   sync.Mutex
	byID map[nsID]*nsHandles
}

// threadNS identifies the network namespace of the calling thread.
func threadNS() (nsID, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
		return nsID{}, fmt.Errorf("tun: network namespace: %w", err)
	}
	return nsID{dev: st.Dev, ino: st.Ino}, nil
}

// openRTNL returns a share of the handles of the calling thread's
// namespace, opening a handle there if fewer than handlesPerNS are open.
// The caller's goroutine must stay on its thread (runtime.LockOSThread)
// if that thread is in another namespace than the process.
func openRTNL() (*rtnl, error) {
	id, err := threadNS()
	if err != nil {
		return nil, err
	}
	namespaces.mu.Lock()
	defer namespaces.mu.Unlock()
	ns := namespaces.byID[id]
	if ns == nil {
		s, err := nl.GetNetlinkSocketAt(netns.None(), netns.None(), unix.NETLINK_ROUTE)
		if err != nil {
			return nil, fmt.Errorf("tun: netlink: %w", err)
		}
		ns = &nsHandles{id: id, raw: &nl.SocketHandle{Socket: s}, group: rand.Uint32() | 1<<31}
	}
	var h *netlink.Handle
	if len(ns.hs) < handlesPerNS {
		if h, err = netlink.NewHandle(unix.NETLINK_ROUTE); err != nil {
			if ns.refs == 0 {
				ns.close()
			}
			return nil, fmt.Errorf("tun: netlink: %w", err)
		}
		ns.hs = append(ns.hs, h)
	} else {
		h = ns.hs[ns.next]
		ns.next = (ns.next + 1) % len(ns.hs)
	}
	ns.refs++
	if namespaces.byID == nil {
		namespaces.byID = make(map[nsID]*nsHandles)
	}
	namespaces.byID[id] = ns
	return &rtnl{ns: ns, h: h}, nil
}

// close ends the user's share; the last user's closes the handles.
func (c *rtnl) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.h == nil {
		return nil
	}
	c.h = nil
	namespaces.mu.Lock()
	defer namespaces.mu.Unlock()
	if c.ns.refs--; c.ns.refs == 0 {
		delete(namespaces.byID, c.ns.id)
		c.ns.close()
	}
	return nil
}

func (ns *nsHandles) close() {
	for _, h := range ns.hs {
		h.Close()
	}
	ns.hs = nil
	if ns.raw != nil {
		ns.raw.Close()
		ns.raw = nil
	}
}

// do runs f with the handle, or returns ErrClosed.
func (c *rtnl) do(f func(h *netlink.Handle) error) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.h == nil {
		return ErrClosed
	}
	return f(c.h)
}

// link names a link by index only: the library then needs no look-up.
func link(index int) netlink.Link {
	return &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: index}}
}

func ipNet(p netip.Prefix) *net.IPNet {
	a := p.Addr().Unmap()
	return &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(p.Bits(), a.BitLen())}
}

// setLink sets MTU (when mtu > 0) and brings the link up or down.
func (c *rtnl) setLink(index, mtu int, up bool) error {
	return c.do(func(h *netlink.Handle) error {
		l := link(index)
		if mtu > 0 {
			if err := h.LinkSetMTU(l, mtu); err != nil {
				return err
			}
		}
		if up {
			return h.LinkSetUp(l)
		}
		return h.LinkSetDown(l)
	})
}

// setTxQueueLen sets the link's transmit queue length.
func (c *rtnl) setTxQueueLen(index, n int) error {
	return c.do(func(h *netlink.Handle) error { return h.LinkSetTxQLen(link(index), n) })
}

// setup gives a new link, still down, its MTU, its transmit queue length
// (unless 0), the namespace's link group, and IPv6 address generation
// mode none (an xfrm interface needs no link-local address, and without
// one the kernel sends no router solicitations into the tunnel, which
// would only be dropped and counted, XfrmOutNoStates, or reach a peer
// that has no use for them). One message instead of four round trips; a
// kernel without IPv6 refuses the whole message for the last part, and
// gets it again without it.
func (c *rtnl) setup(index, mtu, txQueueLen int) error {
	const in6AddrGenModeNone = 1 // IN6_ADDR_GEN_MODE_NONE, linux/if_link.h
	msg := func(v6 bool) *nl.NetlinkRequest {
		req := nl.NewNetlinkRequest(unix.RTM_SETLINK, unix.NLM_F_ACK)
		m := nl.NewIfInfomsg(unix.AF_UNSPEC)
		m.Index = int32(index)
		req.AddData(m)
		req.AddData(nl.NewRtAttr(unix.IFLA_MTU, nl.Uint32Attr(uint32(mtu))))
		if txQueueLen > 0 {
			req.AddData(nl.NewRtAttr(unix.IFLA_TXQLEN, nl.Uint32Attr(uint32(txQueueLen))))
		}
		req.AddData(nl.NewRtAttr(unix.IFLA_GROUP, nl.Uint32Attr(c.ns.group)))
		if v6 {
			af := nl.NewRtAttr(unix.IFLA_AF_SPEC, nil)
			af.AddRtAttr(unix.AF_INET6, nil).AddRtAttr(unix.IFLA_INET6_ADDR_GEN_MODE, nl.Uint8Attr(in6AddrGenModeNone))
			req.AddData(af)
		}
		return req
	}
	c.ns.groupMu.Lock()
	defer c.ns.groupMu.Unlock()
	err := c.exec(msg(true))
	if errors.Is(err, unix.EAFNOSUPPORT) {
		err = c.exec(msg(false))
	}
	if err == nil {
		c.ns.grouped++
	}
	return err
}

// delGroup removes every link of the namespace's group at once (ip link
// del group G), if they are n: the kernel then waits for its RCU grace
// periods once for all of them instead of once per link. It reports
// whether it removed them.
func (c *rtnl) delGroup(n int) bool {
	c.ns.groupMu.Lock()
	defer c.ns.groupMu.Unlock()
	if n != c.ns.grouped {
		return false
	}
	req := nl.NewNetlinkRequest(unix.RTM_DELLINK, unix.NLM_F_ACK)
	req.AddData(nl.NewIfInfomsg(unix.AF_UNSPEC)) // index 0: by group
	req.AddData(nl.NewRtAttr(unix.IFLA_GROUP, nl.Uint32Attr(c.ns.group)))
	if c.exec(req) != nil {
		return false
	}
	groupRemovals.Add(1)
	return true
}

// groupRemovals counts delGroup's removals, for the tests.
var groupRemovals atomic.Int64

// exec sends req through the namespace's raw socket and waits for the
// kernel's answer, or returns ErrClosed.
func (c *rtnl) exec(req *nl.NetlinkRequest) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.h == nil {
		return ErrClosed
	}
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: c.ns.raw}
	_, err := req.Execute(unix.NETLINK_ROUTE, 0)
	return err
}

func (c *rtnl) delLink(index int) error {
	err := c.do(func(h *netlink.Handle) error { return h.LinkDel(link(index)) })
	if errors.Is(err, unix.ENODEV) {
		return nil
	}
	return err
}

// address is p as the library's Addr: IPv6 addresses get IFA_F_NODAD so
// they are usable at once, and IPv4 ones no broadcast address (the
// library computes one unless it is 0.0.0.0; `ip addr add` without brd
// sets none, and a TUN device has no broadcast).
func address(p netip.Prefix) *netlink.Addr {
	a := &netlink.Addr{IPNet: ipNet(p)}
	if p.Addr().Unmap().Is6() {
		a.Flags = unix.IFA_F_NODAD
	} else {
		a.Broadcast = net.IPv4zero
	}
	return a
}

// addAddr adds p.Addr()/p.Bits() to the link; an address that is there
// already is not an error.
func (c *rtnl) addAddr(index int, p netip.Prefix) error {
	err := c.do(func(h *netlink.Handle) error { return h.AddrAdd(link(index), address(p)) })
	if errors.Is(err, unix.EEXIST) {
		return nil
	}
	return err
}

// delAddr removes p.Addr()/p.Bits() from the link; an address that is not
// there is not an error.
func (c *rtnl) delAddr(index int, p netip.Prefix) error {
	err := c.do(func(h *netlink.Handle) error { return h.AddrDel(link(index), address(p)) })
	if errors.Is(err, unix.EADDRNOTAVAIL) {
		return nil
	}
	return err
}

// isLocal reports whether the kernel would deliver packets to a locally,
// as `ip route get A` showing "local" does.
func (c *rtnl) isLocal(a netip.Addr) (bool, error) {
	local := false
	ip := net.IP(a.Unmap().AsSlice())
	err := c.do(func(h *netlink.Handle) error {
		// The source given, the kernel selects none for the lookup, and
		// asked for the FIB entry (ip route get fibmatch), none for the
		// answer's preferred source either: selection walks every
		// address of every interface (ipv6_dev_get_saddr), which made
		// the wait quadratic in the interfaces (3,000 interfaces: a
		// quarter of the CPU time of their start-up).
		rs, err := h.RouteGetWithOptions(ip, &netlink.RouteGetOptions{SrcAddr: ip, FIBMatch: true})
		if err == nil && len(rs) > 0 {
			local = rs[0].Type == unix.RTN_LOCAL
		}
		return err
	})
	return local, err
}

// deviceRoute is the route of prefix p through the link in table (0:
// main), as `ip route add P dev NAME table T` makes it.
func deviceRoute(index int, table uint32, p netip.Prefix) *netlink.Route {
	if table == 0 {
		table = unix.RT_TABLE_MAIN
	}
	p = p.Masked()
	scope := netlink.SCOPE_LINK
	if p.Addr().Unmap().Is6() {
		scope = netlink.SCOPE_UNIVERSE
	}
	return &netlink.Route{
		LinkIndex: index,
		Dst:       ipNet(p),
		Table:     int(table),
		Protocol:  unix.RTPROT_STATIC,
		Scope:     scope,
		Type:      unix.RTN_UNICAST,
	}
}

// addRoute routes prefix p through the link, in table (0: main),
// replacing any route of p there, as `ip route replace P dev NAME` does:
// the prefix is configured to go through this link, even if another route
// held it before.
func (c *rtnl) addRoute(index int, table uint32, p netip.Prefix) error {
	return c.do(func(h *netlink.Handle) error { return h.RouteReplace(deviceRoute(index, table, p)) })
}

// delRoute removes the route addRoute adds; one that is not there is not
// an error.
func (c *rtnl) delRoute(index int, table uint32, p netip.Prefix) error {
	r := deviceRoute(index, table, p)
	r.Scope = netlink.SCOPE_NOWHERE // any scope, as `ip route del` asks
	err := c.do(func(h *netlink.Handle) error { return h.RouteDel(r) })
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	return err
}
