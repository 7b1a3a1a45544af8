package stack

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// DialContext connects to address on the named network through the
// netstack: "tcp", "tcp4", "tcp6", "udp", "udp4" or "udp6". The address
// is ip:port ([ip]:port for IPv6); no names are resolved. It is
// net.Dialer.DialContext's counterpart; ctx bounds the TCP handshake.
func (n *Net) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	ap, err := parseAddrPort(network, address)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	if !ap.Addr().IsValid() || ap.Addr().IsUnspecified() || ap.Port() == 0 {
		return nil, &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("stack: address %q: want a destination ip:port", address)}
	}
	fa, proto := fullAddr(ap)
	if isTCP(network) {
		c, err := gonet.DialContextTCP(ctx, n.link.s, fa, proto)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	c, err := gonet.DialUDP(n.link.s, nil, &fa, proto)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Dial is DialContext with the background context.
func (n *Net) Dial(network, address string) (net.Conn, error) {
	return n.DialContext(context.Background(), network, address)
}

// ListenTCP listens for TCP connections on addr. A nil addr, or one with
// no IP or the IPv6 unspecified address, listens on every address of both
// families; 0.0.0.0 on every IPv4 one. Port 0 picks a free port (see the
// listener's Addr).
func (n *Net) ListenTCP(addr *net.TCPAddr) (net.Listener, error) {
	var ap netip.AddrPort
	if addr != nil {
		var err error
		if ap, err = fromIPPort(addr.IP, addr.Port); err != nil {
			return nil, &net.OpError{Op: "listen", Net: "tcp", Err: err}
		}
	}
	fa, proto := bindAddr(ap)
	l, err := gonet.ListenTCP(n.link.s, fa, proto)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// ListenUDP is DialUDP(addr, nil): a socket bound to addr (chosen as
// ListenTCP's) that receives from anyone.
func (n *Net) ListenUDP(addr *net.UDPAddr) (net.PacketConn, error) {
	return n.DialUDP(addr, nil)
}

// DialUDP returns a UDP socket bound to laddr (nil: any address, a free
// port) and, when raddr is not nil, connected to raddr: it then also
// implements net.Conn (Read and Write reach raddr only).
func (n *Net) DialUDP(laddr, raddr *net.UDPAddr) (net.PacketConn, error) {
	var lfa, rfa *tcpip.FullAddress
	proto := header.IPv6ProtocolNumber
	if laddr != nil {
		ap, err := fromIPPort(laddr.IP, laddr.Port)
		if err != nil {
			return nil, &net.OpError{Op: "dial", Net: "udp", Err: err}
		}
		fa, p := bindAddr(ap)
		lfa, proto = &fa, p
	}
	if raddr != nil {
		ap, err := fromIPPort(raddr.IP, raddr.Port)
		if err != nil || !ap.Addr().IsValid() || ap.Port() == 0 {
			return nil, &net.OpError{Op: "dial", Net: "udp", Err: fmt.Errorf("stack: remote address %v: want a destination ip:port", raddr)}
		}
		fa, p := fullAddr(ap)
		if lfa != nil && lfa.Addr.BitLen() != 0 && p != proto {
			return nil, &net.OpError{Op: "dial", Net: "udp", Err: fmt.Errorf("stack: local %v and remote %v differ in family", laddr, raddr)}
		}
		rfa, proto = &fa, p
	}
	c, err := gonet.DialUDP(n.link.s, lfa, rfa, proto)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func isTCP(network string) bool {
	return network == "tcp" || network == "tcp4" || network == "tcp6"
}

// parseAddrPort parses a dial address and checks it against the network.
func parseAddrPort(network, address string) (netip.AddrPort, error) {
	switch network {
	case "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6":
	default:
		return netip.AddrPort{}, fmt.Errorf("stack: network %q: want tcp, tcp4, tcp6, udp, udp4 or udp6", network)
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("stack: address %q: want ip:port (no names are resolved): %w", address, err)
	}
	ap = netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port())
	switch last := network[len(network)-1]; {
	case last == '4' && !ap.Addr().Is4():
		return netip.AddrPort{}, fmt.Errorf("stack: address %q is not IPv4, as network %q wants", address, network)
	case last == '6' && !ap.Addr().Is6():
		return netip.AddrPort{}, fmt.Errorf("stack: address %q is not IPv6, as network %q wants", address, network)
	}
	return ap, nil
}

// fromIPPort converts a net.IP and port; a nil IP gives an invalid Addr
// with the port.
func fromIPPort(ip net.IP, port int) (netip.AddrPort, error) {
	if port < 0 || port > 0xffff {
		return netip.AddrPort{}, fmt.Errorf("stack: port %d out of range", port)
	}
	if ip == nil {
		return netip.AddrPortFrom(netip.Addr{}, uint16(port)), nil
	}
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("stack: IP %v is not an IPv4 or IPv6 address", ip)
	}
	return netip.AddrPortFrom(a.Unmap(), uint16(port)), nil
}

// fullAddr is a destination through the netstack's NIC. Naming the NIC
// lets loopback-range addresses (transport mode over loopback) be routed
// through it rather than refused as local.
func fullAddr(ap netip.AddrPort) (tcpip.FullAddress, tcpip.NetworkProtocolNumber) {
	return tcpip.FullAddress{NIC: nicID, Addr: tcpip.AddrFromSlice(ap.Addr().AsSlice()), Port: ap.Port()}, protoOf(ap.Addr())
}

// bindAddr is a local address to bind. No address, or the IPv6
// unspecified one, binds an IPv6 endpoint to every address; netstack's
// IPv6 endpoints are dual-stack, so it takes IPv4 as well.
func bindAddr(ap netip.AddrPort) (tcpip.FullAddress, tcpip.NetworkProtocolNumber) {
	a := ap.Addr()
	switch {
	case !a.IsValid() || a == netip.IPv6Unspecified():
		return tcpip.FullAddress{Port: ap.Port()}, header.IPv6ProtocolNumber
	case a == netip.IPv4Unspecified():
		return tcpip.FullAddress{Port: ap.Port()}, header.IPv4ProtocolNumber
	}
	return tcpip.FullAddress{Addr: tcpip.AddrFromSlice(a.AsSlice()), Port: ap.Port()}, protoOf(a)
}
