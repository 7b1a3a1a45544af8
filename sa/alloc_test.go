package sa

import (
	"net/netip"
	"testing"
)

// TestAllocs: sealing, opening and lookups allocate nothing (STYLE.md 5).
func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, su := range suites {
		t.Run(su.name, func(t *testing.T) {
			out, in := pair(t, ModeTransport, false, true, 1024, su.set)
			pkt := ipv4Packet(1372)
			seal := make([]Packet, 8)
			open := make([]Packet, 8)
			for i := range seal {
				seal[i] = mkPacket(pkt)
				open[i] = mkPacket(make([]byte, len(pkt)+64))
			}
			bufs := make([][]byte, len(seal))
			for i := range bufs {
				bufs[i] = make([]byte, len(seal[i].Buf))
			}
			sealAll := func() {
				for i := range seal {
					copy(seal[i].Buf[Headroom:], pkt)
					seal[i].Off, seal[i].Len = Headroom, len(pkt)
				}
				out.SealBatch(seal)
			}
			allocs := testing.AllocsPerRun(50, sealAll)
			if allocs != 0 {
				t.Errorf("SealBatch: %v allocations, want 0", allocs)
			}
			allocs = testing.AllocsPerRun(50, func() {
				sealAll()
				for i := range seal {
					n := copy(open[i].Buf[Headroom:], seal[i].Data())
					open[i].Off, open[i].Len = Headroom, n
				}
				in.OpenBatch(open)
				for i := range open {
					if open[i].Drop != CounterNone {
						t.Fatalf("open: %v", open[i].Drop)
					}
				}
			})
			if allocs != 0 {
				t.Errorf("SealBatch+OpenBatch: %v allocations, want 0", allocs)
			}
			// Opened from Src, a buffer of its own, as from a GRO
			// receive buffer.
			allocs = testing.AllocsPerRun(50, func() {
				sealAll()
				for i := range seal {
					open[i].Src = seal[i].Data()
					open[i].Off, open[i].Len = Headroom, seal[i].Len
				}
				in.OpenBatch(open)
				for i := range open {
					if open[i].Drop != CounterNone {
						t.Fatalf("open from Src: %v", open[i].Drop)
					}
					open[i].Src = nil
				}
			})
			if allocs != 0 {
				t.Errorf("SealBatch+OpenBatch from Src: %v allocations, want 0", allocs)
			}
		})
	}
	t.Run("lookups", func(t *testing.T) {
		d := NewSAD(nil)
		if err := d.Replace(manySAs(t, 1000), nil); err != nil {
			t.Fatal(err)
		}
		pkt := v4to("10.0.1.44")
		allocs := testing.AllocsPerRun(100, func() {
			if d.LookupIn(0x1000+300, netip.Addr{}) == nil {
				t.Fatal("LookupIn")
			}
			if s, _ := d.LookupOut(301, pkt); s == nil {
				t.Fatal("LookupOut")
			}
			d.LookupOut(7, pkt) // a miss
		})
		if allocs != 0 {
			t.Errorf("lookups: %v allocations, want 0", allocs)
		}
	})
	// Traffic selector lists (IKE's): the outbound lookup and the
	// inbound check read the packet's protocol and ports in place.
	t.Run("traffic selectors", func(t *testing.T) {
		sel, err := NewSelector([]TS{ts("192.0.2.0/25", protoTCP, 0, 0xffff), ts("192.0.2.0/24", protoUDP, 0, 1023)},
			[]TS{anyTS("203.0.113.0/25"), anyTS("203.0.113.0/24")})
		if err != nil {
			t.Fatal(err)
		}
		d := NewSAD(nil)
		s := newOut(t, 0x100, 1, sel)
		if err := d.Add(s); err != nil {
			t.Fatal(err)
		}
		out, _ := pair(t, ModeTunnel, false, true, 0, suites[0].set)
		in := inWith(t, out, sel, nil)
		pkt := ipv4Packet(1372) // UDP from port 0
		sealed := sealOne(t, out, pkt)
		wire := sealed.Data()
		open := []Packet{mkPacket(wire)}
		allocs := testing.AllocsPerRun(100, func() {
			if got, _ := d.LookupOut(1, pkt); got != s {
				t.Fatal("LookupOut")
			}
			copy(open[0].Buf[Headroom:], wire)
			open[0].Off, open[0].Len = Headroom, len(wire)
			in.OpenBatch(open)
			if open[0].Drop != CounterNone {
				t.Fatalf("open: %v", open[0].Drop)
			}
		})
		if allocs != 0 {
			t.Errorf("lookup and open with traffic selectors: %v allocations, want 0", allocs)
		}
	})
}
