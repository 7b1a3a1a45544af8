package ikenode

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"

	"github.com/ipsecd/ipsecd/ike"
)

// maxDatagram is the largest IKE datagram read: a UDP payload's limit.
const maxDatagram = 65535

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

// listen binds the IKE port on cfg.Listen, or on 0.0.0.0 and :: (:: is
// left out where the host has no IPv6), and starts a reader on each.
func (m *Manager) listen(port uint16) error {
	addrs := m.cfg.Listen
	wildcard := len(addrs) == 0
	if wildcard {
		addrs = []netip.Addr{netip.IPv4Unspecified(), netip.IPv6Unspecified()}
	}
	for _, a := range addrs {
		s, err := m.openSocket(netip.AddrPortFrom(a, port))
		if err != nil {
			if wildcard && a.Is6() && errors.Is(err, syscall.EAFNOSUPPORT) {
				continue
			}
			for _, s := range m.sockets {
				s.close()
			}
			m.sockets = nil
			return fmt.Errorf("ike: port %d: %w", port, err)
		}
		if port == 0 {
			port = s.port // the other sockets take the same one
		}
		m.sockets = append(m.sockets, s)
	}
	for _, s := range m.sockets {
		go m.read(s)
	}
	return nil
}

func (m *Manager) openSocket(ap netip.AddrPort) (*ikeSocket, error) {
	network := "udp4"
	if ap.Addr().Is6() {
		network = "udp6" // Go sets IPV6_V6ONLY for udp6
	}
	c, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(ap))
	if err != nil {
		return nil, err
	}
	s := &ikeSocket{c: c, bound: ap.Addr(), port: netip.MustParseAddrPort(c.LocalAddr().String()).Port()}
	if m.cfg.Mark != 0 {
		if err := setMark(c, m.cfg.Mark); err != nil {
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

func setMark(c *net.UDPConn, mark uint32) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, int(mark))
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("SO_MARK: %w", serr)
	}
	return nil
}

func (s *ikeSocket) close() { s.c.Close() }

// read hands the socket's datagrams to the IKE goroutine until the
// socket closes; a full queue drops them (counted).
func (m *Manager) read(s *ikeSocket) {
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
		m.deliver(packet{b: append([]byte(nil), buf[:n]...), local: netip.AddrPortFrom(local.Unmap(), s.port), remote: remote})
	}
}

// send sends one datagram from local to remote: on the underlay after the
// non-ESP marker when local is the NAT-T port, else on the IKE socket of
// local's family.
func (m *Manager) send(b []byte, local, remote netip.AddrPort) {
	m.ctr.sent.Add(1)
	var err error
	if local.Port() == ike.NATTPort && m.cfg.NATT != nil && local.Port() != m.Port() {
		err = m.cfg.NATT.WriteNonESP(b, remote, local.Addr())
	} else {
		err = m.sendIKEPort(b, local.Addr(), remote)
	}
	if err != nil {
		m.ctr.sendErrors.Add(1)
		m.log.WithError(err).WithField("peer", remote).Debug("ike: send failed")
	}
}

func (m *Manager) sendIKEPort(b []byte, local netip.Addr, remote netip.AddrPort) error {
	for _, s := range m.sockets {
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
func (m *Manager) sendAll(x *ikeSA, msg []byte, local, remote netip.AddrPort) {
	for _, d := range x.sa.Packets(msg) {
		m.send(d, local, remote)
	}
}

// request sends a request of x (or its retransmission) to x's peer.
func (m *Manager) request(x *ikeSA, msg []byte) {
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
