package sa

import (
	"bytes"
	"slices"
	"testing"
)

// sliceSegments is Segments over packets kept in buffers of their own,
// each with TrailerRoom behind it; it counts the calls.
type sliceSegments struct {
	pkts  [][]byte
	calls []int
}

func (s *sliceSegments) Segment(i int) []byte {
	s.calls = append(s.calls, i)
	p := s.pkts[i]
	return p[:len(p)-TrailerRoom]
}

// SealSegments makes what SealBatch makes from the same cleartext and SA
// state, byte for byte, in every suite and both modes, and refuses the
// same packets past a hard packet limit (counting the same packets and
// bytes); it asks for each segment once, in order (the first twice).
func TestSealSegmentsMatchesSealBatch(t *testing.T) {
	sizes := []int{100, 101, 1300, 7, 64}
	for _, su := range suites {
		for _, mode := range []Mode{ModeTunnel, ModeTransport} {
			t.Run(su.name+"/"+mode.String(), func(t *testing.T) {
				set := func(c *Config) {
					su.set(c)
					c.Lifetime.HardPackets = 3
				}
				outBatch, _ := pair(t, mode, false, false, 64, set)
				outSegs, _ := pair(t, mode, false, false, 64, set)
				iv := func(seq uint64, iv []byte) {
					for i := range iv {
						iv[i] = byte(seq) + byte(i)
					}
				}
				outBatch.ivHook, outSegs.ivHook = iv, iv

				want := make([]Packet, len(sizes))
				got := make([]Packet, len(sizes))
				segs := &sliceSegments{}
				for i, n := range sizes {
					clear := ipv4Packet(n)
					buf := make([]byte, Headroom+len(clear)+Tailroom)
					copy(buf[Headroom:], clear)
					want[i] = Packet{Buf: buf, Off: Headroom, Len: len(clear)}
					got[i] = Packet{Buf: make([]byte, len(buf)), Off: Headroom, Len: len(clear)}
					segs.pkts = append(segs.pkts, append(clear, make([]byte, TrailerRoom)...))
				}
				outBatch.SealBatch(want)
				outSegs.SealSegments(got, segs)
				for i := range want {
					if got[i].Drop != want[i].Drop {
						t.Fatalf("packet %d: drop %v, SealBatch's %v", i, got[i].Drop, want[i].Drop)
					}
					if want[i].Drop == CounterNone && !bytes.Equal(got[i].Data(), want[i].Data()) {
						t.Fatalf("packet %d: got\n% x\nSealBatch made\n% x", i, got[i].Data(), want[i].Data())
					}
				}
				if want[3].Drop != XfrmOutStateExpired {
					t.Errorf("packet 3 past the hard limit: drop %v, want XfrmOutStateExpired", want[3].Drop)
				}
				if g, w := outSegs.Stats(), outBatch.Stats(); g.Packets != w.Packets || g.Bytes != w.Bytes {
					t.Errorf("stats %+v, SealBatch's %+v", g, w)
				}
				if want := []int{0, 0, 1, 2}; !slices.Equal(segs.calls, want) {
					t.Errorf("Segment calls %v, want %v", segs.calls, want)
				}
			})
		}
	}
}
