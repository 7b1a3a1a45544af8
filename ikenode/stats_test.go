package ikenode

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/ipsecd/ipsecd/node"
	"github.com/ipsecd/ipsecd/sa"
)

// statsSAD is a SAD of n pairs of SAs, pair i with SPIs 0x1000+2i (in)
// and 0x1001+2i (out), each its own key.
func statsSAD(t testing.TB, n int) *sa.SAD {
	d := sa.NewSAD(nil)
	gw, peer := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	var all []*sa.SA
	for i := range n {
		for _, dir := range []sa.Dir{sa.DirIn, sa.DirOut} {
			src, dst, spi := peer, gw, uint32(0x1000+2*i)
			if dir == sa.DirOut {
				src, dst, spi = gw, peer, spi+1
			}
			key := make([]byte, 20)
			binary.BigEndian.PutUint32(key, spi)
			s, err := sa.New(sa.Config{Src: src, Dst: dst, SPI: spi, Dir: dir, Mode: sa.ModeTunnel, IfID: 1,
				AEAD: &sa.Algorithm{Name: sa.AlgGCM, Key: key}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, s)
		}
	}
	if err := d.Replace(all, nil); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestStatsFromSAD: the stats of an inbound SA by SPI (and destination,
// or any), of an outbound one by SPI and destination; none for an SA the
// SAD lacks, or an outbound one named without its destination.
func TestStatsFromSAD(t *testing.T) {
	stats := StatsFromSAD(statsSAD(t, 3))
	gw, peer := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	tests := []struct {
		name string
		id   node.StateID
		ok   bool
	}{
		{"inbound", node.StateID{Dir: sa.DirIn, SPI: 0x1002, Dst: gw}, true},
		{"inbound, any destination", node.StateID{Dir: sa.DirIn, SPI: 0x1002}, true},
		{"inbound, another destination", node.StateID{Dir: sa.DirIn, SPI: 0x1002, Dst: peer}, false},
		{"outbound", node.StateID{Dir: sa.DirOut, SPI: 0x1003, Dst: peer}, true},
		{"outbound without destination", node.StateID{Dir: sa.DirOut, SPI: 0x1003}, false},
		{"outbound SPI of an inbound SA", node.StateID{Dir: sa.DirOut, SPI: 0x1002, Dst: gw}, false},
		{"unknown SPI", node.StateID{Dir: sa.DirIn, SPI: 0x2000}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, ok := stats(tt.id); ok != tt.ok {
				t.Errorf("stats(%v): found %v, want %v", tt.id, ok, tt.ok)
			}
		})
	}
}

// BenchmarkStatsFromSAD reads an outbound SA's stats beside 10,000 SAs:
// what ike list and RADIUS accounting do per child.
func BenchmarkStatsFromSAD(b *testing.B) {
	stats := StatsFromSAD(statsSAD(b, 5000))
	id := node.StateID{Dir: sa.DirOut, SPI: 0x1001 + 2*2500, Dst: netip.MustParseAddr("192.0.2.2")}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := stats(id); !ok {
			b.Fatal("not found")
		}
	}
}
