package datapath

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/ipsecd/ipsecd/sa"
)

// espBatch returns packets of SPI spi with the given sequence numbers
// (headers only: splittable reads no further).
func espBatch(spi uint32, seqs ...uint32) []sa.Packet {
	pkts := make([]sa.Packet, len(seqs))
	for i, seq := range seqs {
		b := make([]byte, 8)
		binary.BigEndian.PutUint32(b[0:4], spi)
		binary.BigEndian.PutUint32(b[4:8], seq)
		pkts[i] = sa.Packet{Buf: b, Len: len(b)}
	}
	return pkts
}

func seqRange(from uint32, n int) []uint32 {
	s := make([]uint32, n)
	for i := range s {
		s[i] = from + uint32(i)
	}
	return s
}

func TestSplittable(t *testing.T) {
	sad := sa.NewSAD(nil)
	loop := netip.MustParseAddr("127.0.0.1")
	var states []*sa.SA
	for _, w := range []struct {
		spi    uint32
		window uint32
	}{{0x100, 1024}, {0x200, 32}, {0x300, 0}} {
		s, err := sa.New(sa.Config{Src: loop, Dst: loop, SPI: w.spi, Dir: sa.DirIn, Mode: sa.ModeTunnel, IfID: 1,
			AEAD: &sa.Algorithm{Name: "rfc4106(gcm(aes))", Key: make([]byte, 20)}, ReplayWindow: w.window, ESN: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		states = append(states, s)
	}
	if err := sad.Replace(states, nil); err != nil {
		t.Fatal(err)
	}
	gap := append(seqRange(1, 32), seqRange(5000, 32)...)
	mixed := append(espBatch(0x100, seqRange(1, 32)...), espBatch(0x300, seqRange(1, 32)...)...)
	tests := []struct {
		name string
		pkts []sa.Packet
		want bool
	}{
		{"in order, window 1024", espBatch(0x100, seqRange(1, 64)...), true},
		{"span wider than window 32", espBatch(0x200, seqRange(1, 64)...), false},
		{"span within window 32", espBatch(0x200, seqRange(100, 32)...), true},
		{"loss gap wider than the window", espBatch(0x100, gap...), false},
		{"anti-replay off", espBatch(0x300, gap...), true},
		{"low 32 bits wrap (ESN)", espBatch(0x100, seqRange(0xffffffe0, 64)...), true},
		{"reordered within the window", espBatch(0x100, 40, 10, 30, 20, 50, 1), true},
		{"two SAs", mixed, false},
		{"unknown SPI", espBatch(0x999, seqRange(1, 64)...), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := splittable(sad, tt.pkts); got != tt.want {
				t.Errorf("splittable = %v, want %v", got, tt.want)
			}
		})
	}
}
