package sa

import (
	"errors"
	"math"
	"testing"
)

// sealSeqs seals a batch of n packets and returns the sequence numbers
// sealed (0 for each one dropped) and the drops.
func sealSeqs(s *SA, n int) (seqs []uint64, drops []Counter) {
	ps := make([]Packet, n)
	for i := range ps {
		ps[i] = mkPacket(ipv4Packet(8))
	}
	s.SealBatch(ps)
	for _, p := range ps {
		seqs = append(seqs, p.seq)
		drops = append(drops, p.Drop)
	}
	return seqs, drops
}

// TestSeqExhaustedForGood: once the counter has no number left, every
// later batch is refused, the counter stops moving, and no sequence
// number is ever sealed twice. Before, an ESN SA at 2^64-1 refused seq 0
// once and then sealed 1, 2, ... again (nonce reuse under the AEADs), and
// a non-ESN SA kept counting past 2^32 towards the wrap.
func TestSeqExhaustedForGood(t *testing.T) {
	for _, tt := range []struct {
		name  string
		esn   bool
		start uint64
	}{
		{"esn at 2^64", true, math.MaxUint64 - 2},
		{"esn at end", true, seqEndESN - 2},
		{"no esn", false, math.MaxUint32 - 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, _ := pair(t, ModeTunnel, false, tt.esn, 64, suites[0].set)
			out.seq.Store(tt.start)
			seen := map[uint64]bool{}
			refused := false
			for range 5 {
				seqs, drops := sealSeqs(out, 3)
				for i, d := range drops {
					if d == CounterNone {
						if refused {
							t.Fatalf("seq %#x sealed after a refusal", seqs[i])
						}
						if seen[seqs[i]] || seqs[i] == 0 {
							t.Fatalf("seq %#x sealed twice", seqs[i])
						}
						seen[seqs[i]] = true
						continue
					}
					if d != XfrmOutStateSeqError {
						t.Fatalf("drop %v, want XfrmOutStateSeqError", d)
					}
					refused = true
				}
			}
			if !refused {
				t.Fatal("the counter never ran out")
			}
			before := out.seq.Load()
			sealSeqs(out, 3)
			if after := out.seq.Load(); after != before {
				t.Errorf("the exhausted counter moved from %#x to %#x", before, after)
			}
			if st := out.Stats(); st.Seq != out.seqEnd() {
				t.Errorf("Stats().Seq = %#x, want the end %#x", st.Seq, out.seqEnd())
			}
		})
	}
}

// fakeReserver records reservations in blocks, as seqstate does, and
// can be made to fail.
type fakeReserver struct {
	block    uint64
	durable  uint64 // what a restart would start above
	calls    int
	fail     bool
	lastUpto uint64
}

func (f *fakeReserver) Reserve(upto uint64) (uint64, error) {
	f.calls++
	f.lastUpto = upto
	if f.fail {
		return 0, errors.New("disk full")
	}
	f.durable = upto + f.block
	return f.durable, nil
}

// TestSeqReservation: a resumed SA starts above the persisted mark,
// reserves before it uses a number, calls the reserver only when a batch
// crosses the reservation, and refuses (and counts) what it could not
// reserve.
func TestSeqReservation(t *testing.T) {
	out, _ := pair(t, ModeTunnel, false, true, 64, suites[0].set)
	r := &fakeReserver{block: 10}
	used := 0
	out.ivHook = func(seq uint64, iv []byte) {
		if seq > r.durable {
			t.Errorf("seq %d sealed before it was reserved (durable %d)", seq, r.durable)
		}
		used++
	}
	r.durable = 100 // the previous run's reservation
	if err := out.ResumeOutbound(100, r); err != nil {
		t.Fatal(err)
	}
	if r.calls != 0 {
		t.Fatalf("resume called the reserver %d times, want 0 (the first batch reserves)", r.calls)
	}
	seqs, _ := sealSeqs(out, 4)
	if seqs[0] != 101 || r.calls != 1 || r.durable != 114 {
		t.Fatalf("first batch after resume at 100: seq %d, %d calls, durable %d; want 101, 1, 114", seqs[0], r.calls, r.durable)
	}
	sealSeqs(out, 4) // 105..108
	if r.calls != 1 {
		t.Errorf("reserver called %d times inside the reservation", r.calls)
	}
	sealSeqs(out, 8) // 109..116 crosses 114
	if r.calls != 2 || r.lastUpto != 116 {
		t.Errorf("crossing: %d calls, last upto %d; want 2, 116", r.calls, r.lastUpto)
	}
	if used != 16 {
		t.Errorf("%d packets sealed, want 16", used)
	}

	// The disk fails: numbers past the reservation (126) are refused and
	// counted, the rest of the batch goes.
	r.fail = true
	before := out.counters.Get(XfrmOutStateSeqError)
	st0 := out.Stats()
	seqs, drops := sealSeqs(out, 12) // 117..128
	for i, d := range drops {
		want := CounterNone
		if seqs[i] == 0 {
			want = XfrmOutStateSeqError
		}
		if d != want {
			t.Errorf("packet %d: drop %v, want %v", i, d, want)
		}
	}
	if got := out.counters.Get(XfrmOutStateSeqError) - before; got != 2 {
		t.Errorf("XfrmOutStateSeqError +%d, want +2 (127 and 128)", got)
	}
	if st := out.Stats(); st.Packets-st0.Packets != 10 {
		t.Errorf("packets +%d, want +10", st.Packets-st0.Packets)
	}
	_, drops = sealSeqs(out, 1)
	if drops[0] != XfrmOutStateSeqError {
		t.Errorf("while the disk fails: %v, want XfrmOutStateSeqError", drops[0])
	}
	// It recovers: the next batch reserves again.
	r.fail = false
	seqs, drops = sealSeqs(out, 1)
	if drops[0] != CounterNone || seqs[0] != 130 {
		t.Errorf("after recovery: seq %d drop %v, want 130 sealed", seqs[0], drops[0])
	}

	// A reserver that fails from the start: nothing is sealed.
	out2, _ := pair(t, ModeTunnel, false, true, 64, suites[1].set)
	if err := out2.ResumeOutbound(5, &fakeReserver{fail: true}); err != nil {
		t.Fatal(err)
	}
	if _, drops := sealSeqs(out2, 2); drops[0] != XfrmOutStateSeqError || drops[1] != XfrmOutStateSeqError {
		t.Errorf("with a failing reserver: %v, want XfrmOutStateSeqError", drops)
	}
}

// TestSeqReservationAllocs: the reservation compare costs no allocation.
func TestSeqReservationAllocs(t *testing.T) {
	out, _ := pair(t, ModeTunnel, false, true, 64, suites[0].set)
	if err := out.ResumeOutbound(0, &fakeReserver{block: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	ps := []Packet{mkPacket(ipv4Packet(100))}
	data := ps[0].Buf
	if n := testing.AllocsPerRun(100, func() {
		ps[0] = Packet{Buf: data, Off: Headroom, Len: 128}
		copy(data[Headroom:], ipv4Packet(100))
		out.SealBatch(ps)
	}); n > 1 { // ipv4Packet allocates once
		t.Errorf("%v allocs per seal", n)
	}
}

// TestResumeInbound: an inbound SA resumed at a persisted top refuses
// the previous run's packets and takes the peer's next ones at once,
// also when the top has high ESN bits and the peer's next packets cross
// into the next 2^32 epoch.
func TestResumeInbound(t *testing.T) {
	for _, tt := range []struct {
		name string
		esn  bool
		top  uint64
	}{
		{"no esn", false, 1000},
		{"esn", true, 5<<32 + 1000},
		{"esn near wrap", true, 6<<32 - 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, in := pair(t, ModeTunnel, false, tt.esn, 64, suites[0].set)
			// The previous run: the peer sent up to top (with a gap).
			var old []Packet
			out.seq.Store(tt.top - 40)
			for range 40 {
				old = append(old, sealOne(t, out, ipv4Packet(8)))
			}
			gap := old[len(old)-2] // top-1 never arrived
			old = append(old[:len(old)-2], old[len(old)-1])
			if err := in.ResumeInbound(tt.top); err != nil {
				t.Fatal(err)
			}
			// A replay of the previous run, even top-1, which the old
			// window never saw, is refused.
			for _, p := range append(old, gap) {
				if q := openOne(in, p); q.Drop != XfrmInStateSeqError {
					t.Errorf("replay of seq %#x: %v, want XfrmInStateSeqError", p.seq, q.Drop)
				}
			}
			// The peer's next packets go through at once, out of
			// order too.
			a := sealOne(t, out, ipv4Packet(8))
			b := sealOne(t, out, ipv4Packet(8))
			c := sealOne(t, out, ipv4Packet(8))
			for _, p := range []Packet{c, a, b} {
				if q := openOne(in, p); q.Drop != CounterNone {
					t.Errorf("next packet seq %#x: %v", p.seq, q.Drop)
				}
			}
			if top := in.Top(); top != tt.top+3 {
				t.Errorf("top %#x, want %#x", top, tt.top+3)
			}
		})
	}
}

// BenchmarkSealReserved is BenchmarkSeal's aes128gcm16/64 with a
// SeqReserver (in memory, 2^20 a block): the reservation's cost on the
// data path, one compare per batch and a reserver call per block.
func BenchmarkSealReserved(b *testing.B) {
	out, _ := pair(b, ModeTunnel, false, true, 0, suites[0].set)
	if err := out.ResumeOutbound(0, &fakeReserver{block: 1 << 20}); err != nil {
		b.Fatal(err)
	}
	ps := []Packet{mkPacket(ipv4Packet(64 - 28))}
	b.ReportAllocs()
	b.SetBytes(64)
	for b.Loop() {
		ps[0].Buf[Headroom] = 0x45
		ps[0].Off, ps[0].Len = Headroom, 64
		out.SealBatch(ps)
		if ps[0].Drop != CounterNone {
			b.Fatal(ps[0].Drop)
		}
	}
}
