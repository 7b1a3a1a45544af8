package iphdr

import (
	"net/netip"
	"testing"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// BenchmarkVersusGVisor reads what the data path reads from an inner
// packet, once with this package and once with gVisor's tcpip/header, the
// other candidate for ipsecd's one set of header types (docs/design.md,
// "IP headers", has the figures and the choice).
func BenchmarkVersusGVisor(b *testing.B) {
	p4 := v4(5, ProtocolTCP, tcp(8, 1400))
	p6 := v6(ProtocolUDP, make([]byte, 1408))
	d6 := v6(IPv6DestOpts, append(ext(ProtocolTCP, 1), tcp(8, 1400)...))

	var sinkAddr netip.Addr
	for _, a := range []struct {
		name string
		read func()
	}{
		{"iphdr/v4", func() { sinkAddr = IPv4(p4).Src(); sinkAddr = IPv4(p4).Dst() }},
		// The typed accessors return a tcpip.Address, converted.
		{"gvisor/v4", func() {
			sinkAddr = netip.AddrFrom4(header.IPv4(p4).SourceAddress().As4())
			sinkAddr = netip.AddrFrom4(header.IPv4(p4).DestinationAddress().As4())
		}},
		// The slice accessors are our own reading under another name.
		{"gvisor-slice/v4", func() {
			sinkAddr = netip.AddrFrom4([4]byte(header.IPv4(p4).SourceAddressSlice()))
			sinkAddr = netip.AddrFrom4([4]byte(header.IPv4(p4).DestinationAddressSlice()))
		}},
		{"iphdr/v6", func() { sinkAddr = IPv6(p6).Src(); sinkAddr = IPv6(p6).Dst() }},
		{"gvisor/v6", func() {
			sinkAddr = netip.AddrFrom16(header.IPv6(p6).SourceAddress().As16())
			sinkAddr = netip.AddrFrom16(header.IPv6(p6).DestinationAddress().As16())
		}},
	} {
		b.Run("addrs/"+a.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				a.read()
			}
		})
	}
	_ = sinkAddr

	// What transport mode checks of an IPv4 TCP datagram before sealing it.
	b.Run("transport/iphdr/v4", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			h := IPv4(p4)
			if !h.IsValid() || h.TotalLen() != len(p4) || h.IsFragment() ||
				h.Protocol() != ProtocolTCP || !TCP(h.Payload()).IsValid() {
				b.Fatal("refused")
			}
		}
	})
	b.Run("transport/gvisor/v4", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			h := header.IPv4(p4)
			if !h.IsValid(len(p4)) || int(h.TotalLength()) != len(p4) || h.More() || h.FragmentOffset() != 0 ||
				h.Protocol() != ProtocolTCP {
				b.Fatal("refused")
			}
			s := header.TCP(p4[h.HeaderLength():])
			if len(s) < header.TCPMinimumSize || int(s.DataOffset()) < header.TCPMinimumSize || int(s.DataOffset()) > len(s) {
				b.Fatal("refused")
			}
		}
	})

	// The walk through a destination options header to the upper layer,
	// which transport mode makes for IPv6.
	b.Run("extwalk/iphdr", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if nh, _, ok := SkipExtension(IPv6(d6).NextHeader(), IPv6(d6).Payload()); !ok || nh != ProtocolTCP {
				b.Fatal("refused")
			}
		}
	})
	b.Run("extwalk/gvisor", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			h := header.IPv6(d6)
			it := header.MakeIPv6PayloadIterator(header.IPv6ExtensionHeaderIdentifier(h.NextHeader()), buffer.MakeWithData(h.Payload()))
			opts, _, err := it.Next()
			if err != nil {
				b.Fatal(err)
			}
			opts.Release()
			raw, _, err := it.Next()
			if err != nil {
				b.Fatal(err)
			}
			if r, ok := raw.(header.IPv6RawPayloadHeader); !ok || r.Identifier != ProtocolTCP {
				b.Fatal("refused")
			}
			raw.Release()
			it.Release()
		}
	})
}
