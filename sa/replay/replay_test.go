package replay

import (
	"math/rand/v2"
	"testing"
)

const (
	wrap  = uint64(1) << 32
	epoch = uint64(1) << 32
)

// seqs returns from, from+1, ..., to.
func seqs(from, to uint64) []uint64 {
	var s []uint64
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

// except returns s without the numbers in drop.
func except(s []uint64, drop ...uint64) []uint64 {
	var out []uint64
next:
	for _, x := range s {
		for _, d := range drop {
			if x == d {
				continue next
			}
		}
		out = append(out, x)
	}
	return out
}

func TestWindow(t *testing.T) {
	tests := []struct {
		name     string
		size     uint32
		esn      bool
		accepted []uint64 // Advanced in this order first; each must be OK
		seql     uint32   // then Check(seql) ...
		wantSeq  uint64
		want     Verdict // ... and Advance(wantSeq) both give this
		wantTop  uint64  // Top after that Advance
	}{
		// Without ESN.
		{name: "first packet", size: 64, seql: 1, wantSeq: 1, want: OK, wantTop: 1},
		{name: "seq 0 on a fresh window", size: 64, seql: 0, wantSeq: 0, want: TooOld, wantTop: 0},
		{name: "seq 0 later", size: 64, accepted: seqs(1, 10), seql: 0, wantSeq: 0, want: TooOld, wantTop: 10},
		{name: "in order", size: 64, accepted: seqs(1, 3), seql: 4, wantSeq: 4, want: OK, wantTop: 4},
		{name: "out of order within window", size: 64, accepted: except(seqs(1, 10), 5), seql: 5, wantSeq: 5, want: OK, wantTop: 10},
		{name: "duplicate", size: 64, accepted: seqs(1, 10), seql: 7, wantSeq: 7, want: Duplicate, wantTop: 10},
		{name: "duplicate of top", size: 64, accepted: seqs(1, 10), seql: 10, wantSeq: 10, want: Duplicate, wantTop: 10},
		{name: "left edge top-size+1 accepted", size: 64, accepted: []uint64{100}, seql: 37, wantSeq: 37, want: OK, wantTop: 100},
		{name: "left edge top-size rejected", size: 64, accepted: []uint64{100}, seql: 36, wantSeq: 36, want: TooOld, wantTop: 100},
		{name: "far jump ahead", size: 64, accepted: seqs(1, 10), seql: 100000, wantSeq: 100000, want: OK, wantTop: 100000},
		{name: "far jump ahead then old one", size: 64, accepted: append(seqs(1, 10), 100000), seql: 10, wantSeq: 10, want: TooOld, wantTop: 100000},
		{name: "far jump ahead then one inside", size: 64, accepted: append(seqs(1, 10), 100000), seql: 99990, wantSeq: 99990, want: OK, wantTop: 100000},
		// Size 64 uses a ring of 2 words: 133 reuses seq 5's bit position.
		{name: "ring lap clears old bits", size: 64, accepted: []uint64{5, 132}, seql: 133, wantSeq: 133, want: OK, wantTop: 133},
		{name: "ring lap keeps live bits", size: 64, accepted: []uint64{70, 132}, seql: 70, wantSeq: 70, want: Duplicate, wantTop: 132},
		{name: "32-bit top, no wrap without ESN", size: 64, accepted: []uint64{wrap - 1}, seql: 3, wantSeq: 3, want: TooOld, wantTop: wrap - 1},

		// Non-power-of-two and large sizes.
		{name: "size 100 edge accepted", size: 100, accepted: []uint64{1000}, seql: 901, wantSeq: 901, want: OK, wantTop: 1000},
		{name: "size 100 edge rejected", size: 100, accepted: []uint64{1000}, seql: 900, wantSeq: 900, want: TooOld, wantTop: 1000},
		{name: "size 1 only top", size: 1, accepted: []uint64{10}, seql: 9, wantSeq: 9, want: TooOld, wantTop: 10},
		{name: "size 4096 edge accepted", size: 4096, accepted: []uint64{10000}, seql: 10000 - 4095, wantSeq: 10000 - 4095, want: OK, wantTop: 10000},
		{name: "size 4096 edge rejected", size: 4096, accepted: []uint64{10000}, seql: 10000 - 4096, wantSeq: 10000 - 4096, want: TooOld, wantTop: 10000},
		{name: "size 4096 duplicate at edge", size: 4096, accepted: []uint64{10000 - 4095, 10000}, seql: 10000 - 4095, wantSeq: 10000 - 4095, want: Duplicate, wantTop: 10000},
		{name: "size 4000 edge accepted", size: 4000, accepted: []uint64{5000}, seql: 1001, wantSeq: 1001, want: OK, wantTop: 5000},
		{name: "size 4000 edge rejected", size: 4000, accepted: []uint64{5000}, seql: 1000, wantSeq: 1000, want: TooOld, wantTop: 5000},
		{name: "size MaxSize edge accepted", size: MaxSize, accepted: []uint64{200000}, seql: 200000 - MaxSize + 1, wantSeq: 200000 - MaxSize + 1, want: OK, wantTop: 200000},
		{name: "size MaxSize edge rejected", size: MaxSize, accepted: []uint64{200000}, seql: 200000 - MaxSize, wantSeq: 200000 - MaxSize, want: TooOld, wantTop: 200000},

		// Window 0: anti-replay off.
		{name: "off: duplicate accepted", size: 0, accepted: seqs(1, 10), seql: 3, wantSeq: 3, want: OK, wantTop: 10},
		{name: "off: old accepted, top stays", size: 0, accepted: []uint64{1000000}, seql: 1, wantSeq: 1, want: OK, wantTop: 1000000},
		{name: "off: top moves", size: 0, accepted: seqs(1, 10), seql: 11, wantSeq: 11, want: OK, wantTop: 11},
		{name: "off: seq 0 still invalid", size: 0, accepted: seqs(1, 10), seql: 0, wantSeq: 0, want: TooOld, wantTop: 10},

		// ESN.
		{name: "esn: first packet", size: 64, esn: true, seql: 1, wantSeq: 1, want: OK, wantTop: 1},
		{name: "esn: seq 0 on a fresh window", size: 64, esn: true, seql: 0, wantSeq: 0, want: TooOld, wantTop: 0},
		{name: "esn: before the first epoch", size: 64, esn: true, accepted: []uint64{5}, seql: 0xffff_fffe, wantSeq: 0, want: TooOld, wantTop: 5},
		{name: "esn: wrap across 2^32", size: 64, esn: true, accepted: []uint64{wrap - 5}, seql: 3, wantSeq: wrap + 3, want: OK, wantTop: wrap + 3},
		{name: "esn: low half 0 after the wrap", size: 64, esn: true, accepted: []uint64{wrap - 5}, seql: 0, wantSeq: wrap, want: OK, wantTop: wrap},
		{name: "esn: late packet from before the wrap", size: 64, esn: true, accepted: []uint64{wrap - 5, wrap + 1}, seql: 0xffff_fffe, wantSeq: wrap - 2, want: OK, wantTop: wrap + 1},
		{name: "esn: late duplicate from before the wrap", size: 64, esn: true, accepted: []uint64{wrap - 2, wrap + 1}, seql: 0xffff_fffe, wantSeq: wrap - 2, want: Duplicate, wantTop: wrap + 1},
		{name: "esn: previous epoch at the left edge", size: 64, esn: true, accepted: []uint64{wrap + 1}, seql: 0xffff_ffc2, wantSeq: wrap - 62, want: OK, wantTop: wrap + 1},
		// Below the window the RFC reads the number as the next epoch; its
		// ICV then fails, since the sender never sent that number.
		{name: "esn: older than the window is the next epoch", size: 64, esn: true, accepted: []uint64{wrap + 1}, seql: 0xffff_ffc1, wantSeq: epoch + 0xffff_ffc1, want: OK, wantTop: epoch + 0xffff_ffc1},
		{name: "esn: in order far from the wrap", size: 64, esn: true, accepted: []uint64{5*epoch + 1000}, seql: 1001, wantSeq: 5*epoch + 1001, want: OK, wantTop: 5*epoch + 1001},
		{name: "esn: duplicate far from the wrap", size: 64, esn: true, accepted: []uint64{5*epoch + 1000}, seql: 1000, wantSeq: 5*epoch + 1000, want: Duplicate, wantTop: 5*epoch + 1000},
		{name: "esn: one left of the window is the next epoch", size: 64, esn: true, accepted: []uint64{5*epoch + 1000}, seql: 936, wantSeq: 6*epoch + 936, want: OK, wantTop: 6*epoch + 936},
		{name: "esn: past 2^64-1", size: 64, esn: true, accepted: []uint64{^uint64(0) - 1}, seql: 5, wantSeq: 0, want: TooOld, wantTop: ^uint64(0) - 1},
		{name: "esn: last number", size: 64, esn: true, accepted: []uint64{^uint64(0) - 1}, seql: 0xffff_ffff, wantSeq: ^uint64(0), want: OK, wantTop: ^uint64(0)},
		{name: "esn 4096: late packet from before the wrap", size: 4096, esn: true, accepted: []uint64{wrap + 100}, seql: 0xffff_f065, wantSeq: wrap - 3995, want: OK, wantTop: wrap + 100},
		{name: "esn 4096: wrap", size: 4096, esn: true, accepted: []uint64{wrap - 100}, seql: 100, wantSeq: wrap + 100, want: OK, wantTop: wrap + 100},
		{name: "esn off: late packet same epoch", size: 0, esn: true, accepted: []uint64{wrap + 5}, seql: 3, wantSeq: wrap + 3, want: OK, wantTop: wrap + 5},
		{name: "esn off: late packet from before the wrap", size: 0, esn: true, accepted: []uint64{wrap + 1}, seql: 0xffff_fffe, wantSeq: wrap - 2, want: OK, wantTop: wrap + 1},
		{name: "esn off: wrap", size: 0, esn: true, accepted: []uint64{wrap - 1}, seql: 0, wantSeq: wrap, want: OK, wantTop: wrap},
		{name: "esn off: seq 0", size: 0, esn: true, seql: 0, wantSeq: 0, want: TooOld, wantTop: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w Window
			w.Init(tt.size, tt.esn)
			for _, s := range tt.accepted {
				if v := w.Advance(s); v != OK {
					t.Fatalf("setup: Advance(%d) = %v, want OK", s, v)
				}
			}
			seq, v := w.Check(tt.seql)
			if seq != tt.wantSeq || v != tt.want {
				t.Errorf("Check(%#x) = %#x, %v; want %#x, %v", tt.seql, seq, v, tt.wantSeq, tt.want)
			}
			if v := w.Advance(tt.wantSeq); v != tt.want {
				t.Errorf("Advance(%#x) = %v, want %v", tt.wantSeq, v, tt.want)
			}
			if got := w.Top(); got != tt.wantTop {
				t.Errorf("Top() = %#x, want %#x", got, tt.wantTop)
			}
			if tt.want == OK && tt.size > 0 {
				if v := w.Advance(tt.wantSeq); v != Duplicate {
					t.Errorf("second Advance(%#x) = %v, want Duplicate", tt.wantSeq, v)
				}
			}
		})
	}
}

func TestZeroValue(t *testing.T) {
	var w Window
	if got := w.Size(); got != 0 {
		t.Errorf("Size() = %d, want 0", got)
	}
	for _, tt := range []struct {
		seql uint32
		want Verdict
	}{{0, TooOld}, {5, OK}, {5, OK}, {3, OK}, {0xffff_ffff, OK}} {
		seq, v := w.Check(tt.seql)
		if seq != uint64(tt.seql) || v != tt.want {
			t.Errorf("Check(%d) = %d, %v; want %d, %v", tt.seql, seq, v, tt.seql, tt.want)
		}
		if v := w.Advance(seq); v != tt.want {
			t.Errorf("Advance(%d) = %v, want %v", seq, v, tt.want)
		}
	}
	if got, want := w.Top(), uint64(0xffff_ffff); got != want {
		t.Errorf("Top() = %d, want %d", got, want)
	}
}

func TestInitResets(t *testing.T) {
	var w Window
	w.Init(64, false)
	w.Advance(10)
	w.Init(64, true)
	if got := w.Top(); got != 0 {
		t.Errorf("Top() after Init = %d, want 0", got)
	}
	if _, v := w.Check(10); v != OK {
		t.Errorf("Check(10) after Init = %v, want OK", v)
	}
	if got := w.Size(); got != 64 {
		t.Errorf("Size() = %d, want 64", got)
	}
}

func TestInitTooLarge(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Errorf("Init(MaxSize+1) did not panic")
		}
	}()
	var w Window
	w.Init(MaxSize+1, false)
}

func TestRingSize(t *testing.T) {
	for _, tt := range []struct {
		size      uint32
		wantWords int
	}{
		{0, 0}, {1, 1}, {32, 2}, {64, 2}, {65, 2}, {66, 4}, {100, 4},
		{1024, 32}, {4000, 64}, {4096, 128}, {MaxSize, 2048},
	} {
		var w Window
		w.Init(tt.size, false)
		if got := len(w.ring); got != tt.wantWords {
			t.Errorf("Init(%d): %d words, want %d", tt.size, got, tt.wantWords)
		}
	}
}

func TestVerdictString(t *testing.T) {
	for v, want := range map[Verdict]string{OK: "OK", Duplicate: "Duplicate", TooOld: "TooOld", 7: "Verdict(7)"} {
		if got := v.String(); got != want {
			t.Errorf("Verdict(%d).String() = %q, want %q", uint8(v), got, want)
		}
	}
}

// TestAgainstModel drives a Window and the reference model with the same
// random packet stream: mostly in order, with reordering, duplicates, old
// packets and jumps, and compares every answer.
func TestAgainstModel(t *testing.T) {
	sizes := []uint32{0, 1, 32, 64, 100, 1024, 4000, 4096}
	starts := []uint64{0, wrap - 3000, 7*epoch - 50}
	for _, esn := range []bool{false, true} {
		for _, size := range sizes {
			for i, start := range starts {
				if !esn && start >= wrap {
					continue
				}
				rng := rand.New(rand.NewPCG(uint64(size), uint64(i)))
				var w Window
				w.Init(size, esn)
				m := newModel(size, esn)
				if start > 0 {
					w.Advance(start)
					m.advance(start)
				}
				ops := 20000
				if testing.Short() {
					ops = 2000
				}
				for n := 0; n < ops; n++ {
					// The next packet, relative to the current top.
					var d int64
					switch r := rng.IntN(100); {
					case r < 60:
						d = 1
					case r < 90:
						d = -rng.Int64N(int64(size) + 200)
					case r < 98:
						d = rng.Int64N(300)
					default:
						d = rng.Int64N(1 << 20)
					}
					next := int64(m.top) + d
					if !esn {
						// Stay inside the 32-bit space.
						next = min(max(next, 0), int64(^uint32(0)))
					}
					seql := uint32(next)
					seq, v := w.Check(seql)
					mseq, mv := m.check(seql)
					if seq != mseq || v != mv {
						t.Fatalf("size %d esn %v op %d: Check(%#x) = %#x, %v; model says %#x, %v (top %#x)",
							size, esn, n, seql, seq, v, mseq, mv, m.top)
					}
					got, want := w.Advance(seq), m.advance(seq)
					if got != want {
						t.Fatalf("size %d esn %v op %d: Advance(%#x) = %v, model says %v", size, esn, n, seq, got, want)
					}
					if w.Top() != m.top {
						t.Fatalf("size %d esn %v op %d: Top() = %#x, model says %#x", size, esn, n, w.Top(), m.top)
					}
				}
			}
		}
	}
}

func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	var w Window
	w.Init(1024, true)
	var seql uint32
	if n := testing.AllocsPerRun(1000, func() {
		seql++
		w.Check(seql)
	}); n != 0 {
		t.Errorf("Check: %v allocs per run, want 0", n)
	}
	var seq uint64
	if n := testing.AllocsPerRun(1000, func() {
		seq += 3
		w.Advance(seq)
		w.Advance(seq - 1)
	}); n != 0 {
		t.Errorf("Advance: %v allocs per run, want 0", n)
	}
}

func BenchmarkCheck(b *testing.B) {
	var w Window
	w.Init(1024, true)
	for s := uint64(1); s <= 2000; s++ {
		w.Advance(s)
	}
	b.ReportAllocs()
	var seql uint32 = 1500
	for b.Loop() {
		w.Check(seql)
		seql = 1500 + (seql+1)&511
	}
}

func BenchmarkCheckParallel(b *testing.B) {
	var w Window
	w.Init(1024, true)
	for s := uint64(1); s <= 2000; s++ {
		w.Advance(s)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var seql uint32 = 1500
		for pb.Next() {
			w.Check(seql)
			seql = 1500 + (seql+1)&511
		}
	})
}

func BenchmarkAdvance(b *testing.B) {
	b.Run("in-order", func(b *testing.B) {
		var w Window
		w.Init(1024, true)
		b.ReportAllocs()
		var seq uint64
		for b.Loop() {
			seq++
			w.Advance(seq)
		}
	})
	b.Run("reordered", func(b *testing.B) {
		// Pairs swapped: 2, 1, 4, 3, ...
		var w Window
		w.Init(1024, true)
		b.ReportAllocs()
		var n uint64
		for b.Loop() {
			n++
			w.Advance(n ^ 1)
		}
	})
}
