package replay

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrent runs the receive path of docs/design.md lesson 1 from many
// goroutines at once, as RSS queues would: Check with no lock, then Advance
// under the SA's mutex. Every goroutine receives every packet of the same
// stream, each in its own order (shuffled within blocks of 64), so each
// packet arrives several times. Each must be accepted exactly once: a
// stale Check may let a duplicate through to Advance, but must never turn
// away a packet that nobody accepted and that is inside the window, nor
// infer a wrong epoch for it.
func TestConcurrent(t *testing.T) {
	const (
		goroutines = 8
		block      = 64
	)
	packets := 1 << 14
	if testing.Short() || raceEnabled {
		packets = 1 << 12
	}
	for _, tt := range []struct {
		name  string
		size  uint32
		esn   bool
		start uint64 // Top before the stream; the stream is start+1...
	}{
		{"32-bit", 1024, false, 0},
		{"esn across 2^32", 1024, true, wrap - uint64(packets)/2},
		{"esn window 128", 128, true, 3*epoch - 100},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var w Window
			w.Init(tt.size, tt.esn)
			if tt.start > 0 {
				w.Advance(tt.start)
			}
			var (
				mu          sync.Mutex // the SA's lock: serialises Advance
				accepted    = make([]atomic.Int32, packets)
				wrongSeq    atomic.Int32
				falseReject atomic.Int32
				wg          sync.WaitGroup
				startLine   = make(chan struct{})
			)
			for g := range goroutines {
				order := make([]int, packets)
				for i := range order {
					order[i] = i
				}
				rng := rand.New(rand.NewPCG(uint64(g), 1))
				for b := 0; b < packets; b += block {
					blk := order[b:min(b+block, packets)]
					rng.Shuffle(len(blk), func(i, j int) { blk[i], blk[j] = blk[j], blk[i] })
				}
				wg.Go(func() {
					<-startLine
					for _, i := range order {
						want := tt.start + 1 + uint64(i)
						seq, v := w.Check(uint32(want))
						if v != OK {
							// Under the lock, accepted is up to date with
							// the window: a rejection must be backed by
							// an acceptance or by the window's left edge.
							mu.Lock()
							if accepted[i].Load() == 0 && (v == Duplicate || w.Top()-want < uint64(tt.size)) {
								falseReject.Add(1)
							}
							mu.Unlock()
							continue
						}
						if seq != want {
							// A packet that fell behind the window is read
							// as the next epoch (RFC 4303 A2.2); its ICV
							// would fail. Nothing else may differ.
							if seq != want+epoch || !tt.esn {
								wrongSeq.Add(1)
							}
							continue
						}
						mu.Lock()
						if w.Advance(seq) == OK {
							accepted[i].Add(1)
						}
						mu.Unlock()
					}
				})
			}
			close(startLine)
			wg.Wait()
			if n := wrongSeq.Load(); n != 0 {
				t.Errorf("Check inferred a wrong seq %d times, want 0", n)
			}
			if n := falseReject.Load(); n != 0 {
				t.Errorf("Check turned away a packet nobody accepted %d times, want 0", n)
			}
			bad := 0
			for i := range accepted {
				if got := accepted[i].Load(); got != 1 {
					if bad++; bad <= 10 {
						t.Errorf("seq %#x accepted %d times, want 1", tt.start+1+uint64(i), got)
					}
				}
			}
			if got, want := w.Top(), tt.start+uint64(packets); got != want {
				t.Errorf("Top() = %#x, want %#x", got, want)
			}
		})
	}
}
