package stack

import (
	"fmt"
	"net"
	"net/netip"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	gvstack "gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/icmp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"

	"github.com/ipsecd/ipsecd/xfrmif"
)

// nicID is the one NIC of the netstack.
const nicID tcpip.NICID = 1

// link is the xfrmif.Link of a netstack: a gVisor stack with one NIC over
// the endpoint. Addresses and routes are the stack's; its single queue is
// the endpoint. One queue is enough: netstack's TCP, not the link, is the
// bottleneck, and a second queue would need netstack to spread flows over
// queues, which it only does through a qdisc's extra goroutines.
type link struct {
	s  *gvstack.Stack
	ep *endpoint
	qs []xfrmif.Queue
}

var _ xfrmif.Link = (*link)(nil)

// newLink makes a gVisor stack (IPv4, IPv6, TCP, UDP, ICMP) with one NIC
// over a new endpoint of the given MTU.
func newLink(mtu int) (*link, error) {
	s := gvstack.New(gvstack.Options{
		NetworkProtocols: []gvstack.NetworkProtocolFactory{
			// Addresses in 127.0.0.0/8 and ::1 are the netstack's own,
			// not the host's loopback: packets with them come from the
			// peer through ESP (transport mode over loopback in tests).
			ipv4.NewProtocolWithOptions(ipv4.Options{AllowExternalLoopbackTraffic: true}),
			ipv6.NewProtocolWithOptions(ipv6.Options{AllowExternalLoopbackTraffic: true}),
		},
		TransportProtocols: []gvstack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol, icmp.NewProtocol4, icmp.NewProtocol6},
		HandleLocal:        true,
	})
	fail := func(what string, err tcpip.Error) (*link, error) {
		s.Close()
		s.Wait()
		return nil, fmt.Errorf("stack: %s: %s", what, err)
	}
	// SACK recovers from loss in a round trip rather than a timeout;
	// gVisor has it off by default. Larger buffers than gVisor's
	// defaults (1 MiB) let one connection fill a fast link, and receive
	// buffer auto-tuning grows them as needed.
	sack := tcpip.TCPSACKEnabled(true)
	if err := s.SetTransportProtocolOption(tcp.ProtocolNumber, &sack); err != nil {
		return fail("TCP SACK", err)
	}
	rcv := tcpip.TCPReceiveBufferSizeRangeOption{Min: 4 << 10, Default: 1 << 20, Max: 8 << 20}
	if err := s.SetTransportProtocolOption(tcp.ProtocolNumber, &rcv); err != nil {
		return fail("TCP receive buffer", err)
	}
	snd := tcpip.TCPSendBufferSizeRangeOption{Min: 4 << 10, Default: 1 << 20, Max: 6 << 20}
	if err := s.SetTransportProtocolOption(tcp.ProtocolNumber, &snd); err != nil {
		return fail("TCP send buffer", err)
	}
	moderate := tcpip.TCPModerateReceiveBufferOption(true)
	if err := s.SetTransportProtocolOption(tcp.ProtocolNumber, &moderate); err != nil {
		return fail("TCP receive buffer moderation", err)
	}
	ep := newEndpoint(mtu)
	// The endpoint is also the NIC's qdisc, so that packets reach its queue
	// without the per-packet list the default qdisc makes (endpoint.go).
	if err := s.CreateNICWithOptions(nicID, ep, gvstack.NICOptions{Name: "esp0", QDisc: ep}); err != nil {
		return fail("create NIC", err)
	}
	return &link{s: s, ep: ep, qs: []xfrmif.Queue{ep}}, nil
}

// Queues implements xfrmif.Link: the endpoint is the only queue.
func (l *link) Queues() []xfrmif.Queue { return l.qs }

// SetMTU implements xfrmif.Link.
func (l *link) SetMTU(mtu int) error {
	if err := l.s.SetNICMTU(nicID, uint32(mtu)); err != nil {
		return fmt.Errorf("stack: set MTU %d: %s", mtu, err)
	}
	return nil
}

// AddAddress implements xfrmif.Link: p's address becomes one of the
// netstack's own. Adding one it has is not an error.
func (l *link) AddAddress(p netip.Prefix) error {
	pa := tcpip.ProtocolAddress{
		Protocol: protoOf(p.Addr()),
		AddressWithPrefix: tcpip.AddressWithPrefix{
			Address:   tcpip.AddrFromSlice(p.Addr().AsSlice()),
			PrefixLen: p.Bits(),
		},
	}
	err := l.s.AddProtocolAddress(nicID, pa, gvstack.AddressProperties{})
	if _, dup := err.(*tcpip.ErrDuplicateAddress); err != nil && !dup {
		return fmt.Errorf("stack: add address %v: %s", p, err)
	}
	return nil
}

// RemoveAddress implements xfrmif.Link.
func (l *link) RemoveAddress(p netip.Prefix) error {
	err := l.s.RemoveAddress(nicID, tcpip.AddrFromSlice(p.Addr().AsSlice()))
	if _, missing := err.(*tcpip.ErrBadLocalAddress); err != nil && !missing {
		return fmt.Errorf("stack: remove address %v: %s", p, err)
	}
	return nil
}

// AddRoute implements xfrmif.Link: packets to p leave through the NIC,
// into the tunnel. Adding a route it has is not an error.
func (l *link) AddRoute(p netip.Prefix) error {
	sn := subnetOf(p)
	l.s.RemoveRoutes(func(r tcpip.Route) bool { return r.Destination.Equal(sn) })
	l.s.AddRoute(tcpip.Route{Destination: sn, NIC: nicID})
	return nil
}

// RemoveRoute implements xfrmif.Link.
func (l *link) RemoveRoute(p netip.Prefix) error {
	sn := subnetOf(p)
	l.s.RemoveRoutes(func(r tcpip.Route) bool { return r.Destination.Equal(sn) })
	return nil
}

// Close implements xfrmif.Link: reads return os.ErrClosed, and netstack's
// endpoints are aborted and its goroutines stopped.
func (l *link) Close() error {
	l.ep.close()
	l.s.Close()
	l.s.Wait()
	return nil
}

func protoOf(a netip.Addr) tcpip.NetworkProtocolNumber {
	if a.Is4() {
		return header.IPv4ProtocolNumber
	}
	return header.IPv6ProtocolNumber
}

// subnetOf converts a prefix (not an IPv4-mapped one), masking it.
func subnetOf(p netip.Prefix) tcpip.Subnet {
	p = p.Masked()
	mask := net.CIDRMask(p.Bits(), p.Addr().BitLen())
	sn, err := tcpip.NewSubnet(tcpip.AddrFromSlice(p.Addr().AsSlice()), tcpip.MaskFromBytes(mask))
	if err != nil {
		panic("stack: subnet of masked prefix " + p.String() + ": " + err.Error())
	}
	return sn
}
