package sa

import (
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// checkWiped fails unless every key byte s owns is zero and Config shows
// no key.
func checkWiped(t *testing.T, s *SA) {
	t.Helper()
	for _, a := range []*Algorithm{s.cfg.AEAD, s.cfg.Enc, s.cfg.Auth} {
		if a != nil && !isZero(a.Key) {
			t.Errorf("%v: %s key %x after removal, want zeroes", s, a.Name, a.Key)
		}
	}
	if !isZero(s.t.macKey) || s.t.salt != [4]byte{} || s.t.ghashH != [2]uint64{} ||
		s.t.ghashLen != nil && *s.t.ghashLen != (ghashLenTable{}) {
		t.Errorf("%v: transform keys (HMAC %x, salt %x, GHASH %x) after removal, want zeroes", s, s.t.macKey, s.t.salt, s.t.ghashH)
	}
	c := s.Config()
	for _, a := range []*Algorithm{c.AEAD, c.Enc, c.Auth} {
		if a != nil && a.Key != nil {
			t.Errorf("%v: Config() shows %s key %x after removal, want nil", s, a.Name, a.Key)
		}
	}
}

// keyCopies returns copies of the keys s holds now.
func keyCopies(s *SA) [][]byte {
	var keys [][]byte
	for _, a := range []*Algorithm{s.cfg.AEAD, s.cfg.Enc, s.cfg.Auth} {
		if a != nil && len(a.Key) != 0 {
			keys = append(keys, append([]byte(nil), a.Key...))
		}
	}
	return keys
}

// TestDeleteWipesKeys: for every suite, Delete zeroes the key material of
// the SA it removes, which then drops what still reaches it as a state
// that is no longer valid; the SA that stays keeps its keys.
func TestDeleteWipesKeys(t *testing.T) {
	for _, su := range suites {
		t.Run(su.name, func(t *testing.T) {
			d := NewSAD(nil)
			out, in := pair(t, ModeTunnel, false, false, 64, su.set)
			if err := d.Replace([]*SA{out, in}, nil); err != nil {
				t.Fatal(err)
			}
			e := sealOne(t, out, ipv4Packet(40))
			if len(keyCopies(out)) == 0 && su.name != "null-sha256" {
				t.Fatal("the SA holds no key to wipe")
			}
			if err := d.Delete(DirOut, 0x1001, netip.Addr{}); err != nil {
				t.Fatal(err)
			}
			checkWiped(t, out)
			if k := in.Config(); (k.AEAD != nil && isZero(k.AEAD.Key)) || (k.Auth != nil && isZero(k.Auth.Key)) {
				t.Errorf("the in SA's keys were zeroed by deleting the out SA")
			}
			ps := []Packet{mkPacket(ipv4Packet(40))}
			out.SealBatch(ps)
			if ps[0].Drop != XfrmOutStateInvalid || out.counters.Get(XfrmOutStateInvalid) != 1 {
				t.Errorf("seal with a deleted SA: %v (counted %d), want XfrmOutStateInvalid once", ps[0].Drop, out.counters.Get(XfrmOutStateInvalid))
			}
			if err := d.Delete(DirIn, 0x1001, netip.Addr{}); err != nil {
				t.Fatal(err)
			}
			checkWiped(t, in)
			if p := openOne(in, e); p.Drop != XfrmInStateInvalid {
				t.Errorf("open with a deleted SA: %v, want XfrmInStateInvalid", p.Drop)
			}
			if err := d.Add(in); !errors.Is(err, ErrRetired) {
				t.Errorf("Add of a deleted SA: %v, want ErrRetired", err)
			}
		})
	}
}

// TestReplaceWipesRemoved: a Replace (a reload) wipes the SAs it drops
// and leaves the ones it keeps, and the ones it adds, intact; a removed SA
// cannot come back.
func TestReplaceWipesRemoved(t *testing.T) {
	d := NewSAD(nil)
	kept := newOut(t, 0x100, 1, Selector{})
	dropped := newOut(t, 0x101, 2, Selector{})
	if err := d.Replace([]*SA{kept, dropped}, nil); err != nil {
		t.Fatal(err)
	}
	keptKeys := keyCopies(kept)
	added := newOut(t, 0x102, 3, Selector{})
	if err := d.Replace([]*SA{kept, added}, nil); err != nil {
		t.Fatal(err)
	}
	checkWiped(t, dropped)
	if kept.Retired() || added.Retired() {
		t.Errorf("kept or added SA retired by Replace")
	}
	if got := keyCopies(kept); string(got[0]) != string(keptKeys[0]) {
		t.Errorf("kept SA's key %x after Replace, want %x", got[0], keptKeys[0])
	}
	if err := d.Replace([]*SA{kept, added, dropped}, nil); !errors.Is(err, ErrRetired) {
		t.Errorf("Replace with a removed SA: %v, want ErrRetired", err)
	}
	if got := len(d.States()); got != 2 {
		t.Errorf("a refused Replace changed the SAD: %d SAs, want 2", got)
	}
	// Emptying the SAD (the daemon's stop) wipes everything.
	if err := d.Replace(nil, nil); err != nil {
		t.Fatal(err)
	}
	checkWiped(t, kept)
	checkWiped(t, added)
}

// TestDiscard: an SA that never joined a SAD has its keys zeroed by
// Discard, and cannot join one afterwards.
func TestDiscard(t *testing.T) {
	out, _ := pair(t, ModeTunnel, false, false, 0, suites[5].set)
	out.Discard()
	checkWiped(t, out)
	if err := NewSAD(nil).Add(out); !errors.Is(err, ErrRetired) {
		t.Errorf("Add after Discard: %v, want ErrRetired", err)
	}
}

// TestWipeWaitsForBatches: an SA removed while a batch is inside it keeps
// its keys until that batch is done; the batch that leaves last wipes it.
func TestWipeWaitsForBatches(t *testing.T) {
	d := NewSAD(nil)
	out, _ := pair(t, ModeTunnel, false, false, 0, suites[5].set)
	if err := d.Add(out); err != nil {
		t.Fatal(err)
	}
	want := keyCopies(out)
	// Two batches in flight, as workers that found the SA in the table
	// just before it was deleted.
	if !out.enter() || !out.enter() {
		t.Fatal("enter refused on a live SA")
	}
	if err := d.Delete(DirOut, 0x1001, netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if !out.Retired() || out.Wiped() {
		t.Fatalf("deleted with batches inside: retired %v, wiped %v; want retired, not wiped", out.Retired(), out.Wiped())
	}
	for i, k := range keyCopies(out) {
		if string(k) != string(want[i]) {
			t.Fatalf("key %d zeroed while batches were inside", i)
		}
	}
	// A batch that starts now still finds the keys and may finish.
	sealOne(t, out, ipv4Packet(10))
	out.exit()
	if out.Wiped() {
		t.Fatal("wiped with one batch still inside")
	}
	out.exit()
	if !out.Wiped() {
		t.Fatal("not wiped after the last batch left")
	}
	checkWiped(t, out)
	if out.use.Load() != retiredBit|wipedBit {
		t.Errorf("use word %#x, want retired|wiped with no batch inside", out.use.Load())
	}
}

// TestWipeUnderLoad: goroutines seal with an SA while it is deleted. Every
// packet is either sealed with the SA's real keys (a twin SA with the same
// keys opens it) or dropped as XfrmOutStateInvalid; none is sealed with
// half-wiped keys. Run it with -race too.
func TestWipeUnderLoad(t *testing.T) {
	for _, su := range []int{0, 5} { // AES-GCM (salt), AES-CBC with HMAC (HMAC key)
		t.Run(suites[su].name, func(t *testing.T) {
			d := NewSAD(nil)
			out, _ := pair(t, ModeTunnel, false, false, 0, suites[su].set)
			_, twinIn := pair(t, ModeTunnel, false, false, 0, suites[su].set) // window 0: order does not matter
			if err := d.Add(out); err != nil {
				t.Fatal(err)
			}
			var sealed, invalid, bad atomic.Int64
			var wg sync.WaitGroup
			stop := make(chan struct{})
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						ps := []Packet{mkPacket(ipv4Packet(64)), mkPacket(ipv4Packet(64))}
						out.SealBatch(ps)
						for _, p := range ps {
							switch p.Drop {
							case CounterNone:
								sealed.Add(1)
								if q := openOne(twinIn, p); q.Drop != CounterNone {
									bad.Add(1)
								}
							case XfrmOutStateInvalid:
								invalid.Add(1)
							default:
								bad.Add(1)
							}
						}
					}
				}()
			}
			// Let the workers run, then delete under them.
			for deadline := time.Now().Add(5 * time.Second); sealed.Load() < 200 && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			if err := d.Delete(DirOut, 0x1001, netip.Addr{}); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(5 * time.Second); invalid.Load() < 200 && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			close(stop)
			wg.Wait()
			if sealed.Load() == 0 || invalid.Load() == 0 {
				t.Fatalf("sealed %d, invalid %d: want both before and after the delete", sealed.Load(), invalid.Load())
			}
			if bad.Load() != 0 {
				t.Errorf("%d packets sealed with wrong keys or dropped otherwise (of %d sealed)", bad.Load(), sealed.Load())
			}
			if !out.Wiped() {
				t.Errorf("not wiped once every worker stopped")
			}
			checkWiped(t, out)
		})
	}
}

// BenchmarkEnterExit is what the retire guard adds to every SealBatch and
// OpenBatch: two atomic adds on the SA's use word (per batch, not per
// packet). Run with -cpu 1,2,4 to see it under contention.
func BenchmarkEnterExit(b *testing.B) {
	out, _ := pair(b, ModeTunnel, false, false, 0, suites[0].set)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if out.enter() {
				out.exit()
			}
		}
	})
}
