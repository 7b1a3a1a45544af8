package ikenode

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"

	"github.com/ipsecd/ipsecd/ike"
)

// maxDatagram is the largest IKE datagram read: a UDP payload's limit.
const maxDatagram = 65535

// Transport opens the IKE port. The zero Config's binds UDP sockets
// (UDP); tests connect IKE daemons through an in-memory network instead.
type Transport interface {
	// Listen binds port (0: one chosen) on addrs (none: the unspecified
	// addresses, where each datagram's local address is the one it was
	// sent to) and hands each datagram that arrives to deliver, with
	// the address and port it arrived at and the peer's. deliver owns
	// b, must not block, and is called from any goroutine until Close.
	Listen(addrs []netip.Addr, port uint16, deliver func(b []byte, local, remote netip.AddrPort)) (Bind, error)
}

// Bind is a bound IKE port.
type Bind interface {
	// Send sends b to remote from local, one of the bound addresses
	// (or any, bound to an unspecified one). b is not kept.
	Send(b []byte, local netip.Addr, remote netip.AddrPort) error
	// Port returns the bound port.
	Port() uint16
	// Close releases the port; deliver is not called after it
	// returned but for a datagram being handed over.
	Close() error
}

// UDP is the Transport of UDP sockets, with SO_MARK Mark when nonzero.
type UDP struct {
	Mark uint32
}

// udpBind is the sockets of one IKE port.
type udpBind struct {
	sockets []*ikeSocket
	port    uint16
}

// ikeSocket is one UDP socket on the IKE port. Bound to an unspecified
// address it reads each datagram's local address from IP_PKTINFO and
// sets it as the source of what it sends, so that answers leave from
// the address the peer talked to.
type ikeSocket struct {
	c     *net.UDPConn
	p4    *ipv4.PacketConn // wildcard IPv4 socket
	p6    *ipv6.PacketConn // wildcard IPv6 socket
	bound netip.Addr       // the bound address
	port  uint16
}

// Listen binds the IKE port on addrs, or on 0.0.0.0 and :: (:: is left
// out where the host has no IPv6), and starts a reader on each socket.
func (u UDP) Listen(addrs []netip.Addr, port uint16, deliver func(b []byte, local, remote netip.AddrPort)) (Bind, error) {
	wildcard := len(addrs) == 0
	if wildcard {
		addrs = []netip.Addr{netip.IPv4Unspecified(), netip.IPv6Unspecified()}
	}
	ub := &udpBind{}
	for _, a := range addrs {
		s, err := u.openSocket(netip.AddrPortFrom(a, port))
		if err != nil {
			if wildcard && a.Is6() && errors.Is(err, syscall.EAFNOSUPPORT) {
				continue
			}
			ub.Close()
			return nil, err
		}
		if port == 0 {
			port = s.port // the other sockets take the same one
		}
		ub.sockets = append(ub.sockets, s)
	}
	ub.port = port
	for _, s := range ub.sockets {
		go s.readIKE(deliver)
	}
	return ub, nil
}

func (u UDP) openSocket(ap netip.AddrPort) (*ikeSocket, error) {
	network := "udp4"
	if ap.Addr().Is6() {
		network = "udp6" // Go sets IPV6_V6ONLY for udp6
	}
	c, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(ap))
	if err != nil {
		return nil, err
	}
	s := &ikeSocket{c: c, bound: ap.Addr(), port: netip.MustParseAddrPort(c.LocalAddr().String()).Port()}
	if u.Mark != 0 {
		if err := setMark(c, u.Mark); err != nil {
			c.Close()
			return nil, err
		}
	}
	if ap.Addr().IsUnspecified() {
		if ap.Addr().Is4() {
			s.p4 = ipv4.NewPacketConn(c)
			err = s.p4.SetControlMessage(ipv4.FlagDst, true)
		} else {
			s.p6 = ipv6.NewPacketConn(c)
			err = s.p6.SetControlMessage(ipv6.FlagDst, true)
		}
		if err != nil {
			c.Close()
			return nil, err
		}
	}
	return s, nil
}

func (s *ikeSocket) close() { s.c.Close() }

// readIKE hands the socket's datagrams to deliver until the socket
// closes.
func (s *ikeSocket) readIKE(deliver func(b []byte, local, remote netip.AddrPort)) {
	buf := make([]byte, maxDatagram)
	for {
		var n int
		var from net.Addr
		var local netip.Addr
		var err error
		switch {
		case s.p4 != nil:
			var cm *ipv4.ControlMessage
			n, cm, from, err = s.p4.ReadFrom(buf)
			if cm != nil {
				local, _ = netip.AddrFromSlice(cm.Dst.To4())
			}
		case s.p6 != nil:
			var cm *ipv6.ControlMessage
			n, cm, from, err = s.p6.ReadFrom(buf)
			if cm != nil {
				local, _ = netip.AddrFromSlice(cm.Dst.To16())
			}
		default:
			n, from, err = s.c.ReadFrom(buf)
			local = s.bound
		}
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		ua, ok := from.(*net.UDPAddr)
		if !ok || !local.IsValid() {
			continue
		}
		remote := netip.AddrPortFrom(ua.AddrPort().Addr().Unmap(), uint16(ua.Port))
		deliver(append([]byte(nil), buf[:n]...), netip.AddrPortFrom(local.Unmap(), s.port), remote)
	}
}

// send sends one datagram from local to remote: on the underlay after the
// non-ESP marker when local is the NAT-T port, else on the IKE socket of
// local's family.
func (m *Daemon) send(b []byte, local, remote netip.AddrPort) {
	m.ctr.sent.Add(1)
	var err error
	if local.Port() == ike.NATTPort && m.cfg.NATT != nil && local.Port() != m.Port() {
		err = m.cfg.NATT.WriteNonESP(b, remote, local.Addr())
	} else {
		err = m.bind.Send(b, local.Addr(), remote)
	}
	if err != nil {
		m.ctr.sendErrors.Add(1)
		m.log.WithError(err).WithField("peer", remote).Debug("ike: send failed")
	}
}

func (ub *udpBind) Port() uint16 { return ub.port }

func (ub *udpBind) Close() error {
	for _, s := range ub.sockets {
		s.close()
	}
	return nil
}

func (ub *udpBind) Send(b []byte, local netip.Addr, remote netip.AddrPort) error {
	for _, s := range ub.sockets {
		if s.bound.Is4() != remote.Addr().Is4() {
			continue
		}
		if !s.bound.IsUnspecified() && s.bound != local {
			continue
		}
		to := net.UDPAddrFromAddrPort(remote)
		switch {
		case s.p4 != nil:
			_, err := s.p4.WriteTo(b, &ipv4.ControlMessage{Src: local.AsSlice()}, to)
			return err
		case s.p6 != nil:
			_, err := s.p6.WriteTo(b, &ipv6.ControlMessage{Src: local.AsSlice()}, to)
			return err
		default:
			_, err := s.c.WriteToUDPAddrPort(b, remote)
			return err
		}
	}
	return fmt.Errorf("no IKE socket for %s from %s", remote, local)
}

// sendAll sends the datagrams of an SA's message (all its fragments).
func (m *Daemon) sendAll(x *ikeSA, msg []byte, local, remote netip.AddrPort) {
	for _, d := range x.sa.Packets(msg) {
		m.send(d, local, remote)
	}
}

// request sends a request of x (or its retransmission) to x's peer.
func (m *Daemon) request(x *ikeSA, msg []byte) {
	if msg == nil {
		return // queued behind the exchange under way
	}
	l, r := x.sa.Addrs()
	m.sendAll(x, msg, l, r)
}

// localFor returns the address the kernel would send from to reach
// remote (a connected UDP socket sends nothing).
func localFor(remote netip.Addr) (netip.Addr, error) {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(remote, 9)))
	if err != nil {
		return netip.Addr{}, err
	}
	defer c.Close()
	return netip.MustParseAddrPort(c.LocalAddr().String()).Addr().Unmap(), nil
}
