package sa

import (
	"strconv"
	"testing"
)

// benchSelectors are the inbound selectors BenchmarkOpenSelector and
// BenchmarkLookupSelector compare, for ipv4Packet (UDP 192.0.2.1 ->
// 203.0.113.1): none, one prefix each side (IKE's usual child), and
// (selectorBenchTS) traffic selector lists.
var benchSelectors = []struct {
	name string
	sel  func() Selector
}{
	{"none", func() Selector { return Selector{} }},
	{"prefix", func() Selector { return sel("192.0.2.0/24", "203.0.113.0/24") }},
}

// BenchmarkOpenSelector opens a 1400-byte packet of a tunnel-mode SA with
// each selector: what the inbound check costs.
func BenchmarkOpenSelector(b *testing.B) {
	for _, bs := range append(benchSelectors, selectorBenchTS...) {
		b.Run(bs.name, func(b *testing.B) {
			out, _ := pair(b, ModeTunnel, false, true, 0, suites[0].set)
			in := inWith(b, out, bs.sel(), nil)
			e := sealOne(b, out, ipv4Packet(1400-28))
			wire := append([]byte{}, e.Data()...)
			ps := []Packet{mkPacket(wire)}
			b.ReportAllocs()
			b.SetBytes(1400)
			for b.Loop() {
				copy(ps[0].Buf[Headroom:], wire)
				ps[0].Off, ps[0].Len = Headroom, len(wire)
				in.OpenBatch(ps)
				if ps[0].Drop != CounterNone {
					b.Fatal(ps[0].Drop)
				}
			}
		})
	}
}

// BenchmarkLookupSelector: an outbound lookup of ipv4Packet among 100 SAs
// of one interface, the one that covers it with each selector, the others
// with prefixes of other /24s.
func BenchmarkLookupSelector(b *testing.B) {
	for _, bs := range append(benchSelectors[1:], selectorBenchTS...) {
		b.Run(bs.name, func(b *testing.B) {
			d := NewSAD(nil)
			for i := range 99 {
				if err := d.Add(newOut(b, uint32(0x1000+i), 1, sel("192.0.2.0/24", "10.0."+strconv.Itoa(i)+".0/24"))); err != nil {
					b.Fatal(err)
				}
			}
			if err := d.Add(newOut(b, 0x2000, 1, bs.sel())); err != nil {
				b.Fatal(err)
			}
			pkt := ipv4Packet(1400 - 28)
			b.ReportAllocs()
			for b.Loop() {
				if s, _ := d.LookupOut(1, pkt); s == nil || s.SPI() != 0x2000 {
					b.Fatal("miss")
				}
			}
		})
	}
}
