package underlay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// socketBufferSize is asked for as SO_RCVBUF and SO_SNDBUF (beyond
// net.core.[rw]mem_max with CAP_NET_ADMIN), as wireguard-go does: a burst
// of GRO or GSO batches must not overflow the socket.
const socketBufferSize = 7 << 20

// Conn is the set of underlay sockets of one daemon. Its methods are safe
// for concurrent use; its Readers are not (one goroutine each).
type Conn struct {
	udp4, udp6, raw4, raw6 *socket // nil when not open
	readers                []*Reader

	ctr       counters
	logf      Logf
	nonESP    func([]byte, netip.AddrPort, netip.Addr)
	writePool sync.Pool // *writeScratch: per-call sendmmsg state, so concurrent writers never share it
	closeOnce sync.Once
}

// socket is one open underlay socket.
type socket struct {
	pc    net.PacketConn
	rc    syscall.RawConn
	name  string         // "udp4 127.0.0.1:4500", for logs and errors
	local netip.AddrPort // bound address
	v6    bool
	raw   bool
	// pktinfo: bound to an unspecified address, so IP_PKTINFO tells the
	// local address of a received packet and selects it on send.
	pktinfo bool
	gro     bool        // UDP_GRO is on: receive into 64 KiB buffers
	gso     atomic.Bool // UDP_SEGMENT may be used; cleared on EIO
}

// Open binds the sockets cfg names. logf may be nil.
func Open(cfg Config, logf Logf) (*Conn, error) {
	if !cfg.UDP.IsValid() {
		return nil, fmt.Errorf("%w: no UDP address", ErrBadConfig)
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	c := &Conn{logf: logf, nonESP: cfg.NonESP}
	c.writePool.New = func() any { return newWriteScratch() }
	if err := c.open(cfg); err != nil {
		c.Close()
		return nil, err
	}
	for _, s := range []*socket{c.udp4, c.udp6, c.raw4, c.raw6} {
		if s != nil {
			c.readers = append(c.readers, newReader(c, s))
			c.logf("underlay: listening on %s (gso=%v gro=%v mark=%#x)", s.name, s.gso.Load(), s.gro, cfg.Mark)
		}
	}
	return c, nil
}

func (c *Conn) open(cfg Config) error {
	addr := cfg.UDP.Addr().Unmap()
	if addr.Zone() != "" && !addr.Is6() {
		addr = addr.WithZone("")
	}
	both := addr.IsUnspecified()
	want4 := addr.Is4() || both
	want6 := addr.Is6() || both
	port := cfg.UDP.Port()
	var err error
	if want4 {
		a := addr
		if both {
			a = netip.IPv4Unspecified()
		}
		c.udp4, err = openSocket(cfg, "udp4", netip.AddrPortFrom(a, port))
		if err != nil {
			return err
		}
		if port == 0 {
			port = c.udp4.local.Port() // the IPv6 socket takes the same port
		}
	}
	if want6 {
		a := addr
		if both {
			a = netip.IPv6Unspecified()
		}
		c.udp6, err = openSocket(cfg, "udp6", netip.AddrPortFrom(a, port))
		if err != nil {
			if both && errors.Is(err, unix.EAFNOSUPPORT) {
				c.logf("underlay: no IPv6: %v", err)
				want6 = false
			} else {
				return err
			}
		}
	}
	if !cfg.RawESP {
		return nil
	}
	if want4 {
		a := addr
		if both {
			a = netip.IPv4Unspecified()
		}
		if c.raw4, err = openSocket(cfg, "ip4:50", netip.AddrPortFrom(a, 0)); err != nil {
			return err
		}
	}
	if want6 {
		a := addr
		if both {
			a = netip.IPv6Unspecified()
		}
		if c.raw6, err = openSocket(cfg, "ip6:50", netip.AddrPortFrom(a, 0)); err != nil {
			return err
		}
	}
	return nil
}

// openSocket binds one socket of network ("udp4", "udp6", "ip4:50",
// "ip6:50") to ap with the options of cfg.
func openSocket(cfg Config, network string, ap netip.AddrPort) (*socket, error) {
	s := &socket{
		v6:      network == "udp6" || network == "ip6:50",
		raw:     network == "ip4:50" || network == "ip6:50",
		pktinfo: ap.Addr().IsUnspecified(),
	}
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		cerr := rc.Control(func(fd uintptr) { err = s.setOptions(int(fd), cfg) })
		return errors.Join(cerr, err)
	}}
	address := ap.String()
	if s.raw {
		address = ap.Addr().String()
	}
	pc, err := lc.ListenPacket(context.Background(), network, address)
	if err != nil {
		return nil, fmt.Errorf("underlay: %w", err) // net.OpError names the network and address
	}
	s.pc = pc
	sc, ok := pc.(syscall.Conn)
	if !ok {
		pc.Close()
		return nil, fmt.Errorf("underlay: %s: no raw connection", network)
	}
	if s.rc, err = sc.SyscallConn(); err != nil {
		pc.Close()
		return nil, fmt.Errorf("underlay: %s: %w", network, err)
	}
	switch la := pc.LocalAddr().(type) {
	case *net.UDPAddr:
		s.local = la.AddrPort()
	case *net.IPAddr:
		a, _ := netip.AddrFromSlice(la.IP)
		s.local = netip.AddrPortFrom(a.Unmap(), 0)
	}
	s.name = network + " " + s.local.String()
	if !s.raw {
		s.setOffload(cfg)
	}
	return s, nil
}

// setOptions runs before bind: SO_MARK, buffer sizes and packet info.
func (s *socket) setOptions(fd int, cfg Config) error {
	if cfg.Mark != 0 {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_MARK, int(cfg.Mark)); err != nil {
			return fmt.Errorf("SO_MARK %#x: %w", cfg.Mark, err)
		}
	}
	// Best effort: a smaller buffer costs speed, not correctness.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, socketBufferSize)
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, socketBufferSize)
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, socketBufferSize)
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, socketBufferSize)
	if s.v6 && !s.raw {
		// Go sets it for "udp6" already; say it here because dual-stack
		// service depends on it (the IPv4 socket owns IPv4).
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1); err != nil {
			return fmt.Errorf("IPV6_V6ONLY: %w", err)
		}
	}
	if s.pktinfo {
		var err error
		if s.v6 {
			err = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1)
		} else {
			err = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_PKTINFO, 1)
		}
		if err != nil {
			s.pktinfo = false // Local stays unknown; not fatal
		}
	}
	return nil
}

// setOffload turns on UDP GRO and probes UDP GSO, as far as the kernel and
// cfg allow.
func (s *socket) setOffload(cfg Config) {
	_ = s.rc.Control(func(fd uintptr) {
		if !cfg.DisableGSO {
			_, err := unix.GetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_SEGMENT)
			s.gso.Store(err == nil)
		}
		if !cfg.DisableGRO {
			s.gro = unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_GRO, 1) == nil
		}
	})
}

// Readers returns one Reader per open socket: UDP IPv4, UDP IPv6, raw IPv4,
// raw IPv6, in that order, those that are open. Run a goroutine per Reader.
func (c *Conn) Readers() []*Reader { return c.readers }

// Port returns the bound ESP-in-UDP port (useful when Config.UDP had port 0).
func (c *Conn) Port() uint16 {
	if c.udp4 != nil {
		return c.udp4.local.Port()
	}
	if c.udp6 != nil {
		return c.udp6.local.Port()
	}
	return 0
}

// Counters returns a snapshot of the counters.
func (c *Conn) Counters() Counters { return c.ctr.snapshot() }

// Close closes every socket. Blocked ReadBatch and WriteBatch calls return
// an error that wraps ErrClosed. Close is idempotent.
func (c *Conn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		for _, s := range []*socket{c.udp4, c.udp6, c.raw4, c.raw6} {
			if s != nil {
				err = errors.Join(err, s.pc.Close())
			}
		}
	})
	return err
}

// socketFor picks the socket that carries m, or nil (also for a message
// without a peer address).
func (c *Conn) socketFor(m *Message) *socket {
	if !m.Peer.Addr().IsValid() {
		return nil
	}
	v4 := m.Peer.Addr().Unmap().Is4()
	switch {
	case m.Raw && v4:
		return c.raw4
	case m.Raw:
		return c.raw6
	case v4:
		return c.udp4
	default:
		return c.udp6
	}
}

// zoneIndex returns the interface index an IPv6 zone names, or 0.
func zoneIndex(zone string) uint32 {
	if n, err := strconv.ParseUint(zone, 10, 32); err == nil {
		return uint32(n)
	}
	if ifi, err := net.InterfaceByName(zone); err == nil {
		return uint32(ifi.Index)
	}
	return 0
}

// zoneName returns the zone for an interface index: its name, or the
// number if the interface is gone.
func zoneName(index uint32) string {
	if ifi, err := net.InterfaceByIndex(int(index)); err == nil {
		return ifi.Name
	}
	return strconv.FormatUint(uint64(index), 10)
}
