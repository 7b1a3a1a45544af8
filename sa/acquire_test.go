package sa

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// trapSAD is a SAD whose interface 1 has the out policy of an on-demand
// child (allow 192.0.2.0/24 -> 203.0.113.0/24) and no SA, with an
// Acquire handler that records what it gets.
func trapSAD(t *testing.T, interval time.Duration) (*SAD, Policy, func() []Acquire) {
	t.Helper()
	d := NewSAD(nil)
	trap := Policy{Dir: DirOut, IfID: 1, Selector: sel("192.0.2.0/24", "203.0.113.0/24"), Action: ActionAllow}
	if err := d.AddPolicy(trap); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []Acquire
	d.SetAcquireHandler(func(a Acquire) {
		mu.Lock()
		got = append(got, a)
		mu.Unlock()
	}, interval)
	return d, trap, func() []Acquire {
		mu.Lock()
		defer mu.Unlock()
		return append([]Acquire(nil), got...)
	}
}

// TestAcquire: packets that an allow policy lets through and no SA
// serves are dropped as XfrmOutNoStates, and the first of them raises one
// Acquire naming the policy and the packet's addresses; the next ones,
// within the interval, raise none.
func TestAcquire(t *testing.T) {
	d, trap, got := trapSAD(t, time.Hour)
	pkt := v4to("203.0.113.7")
	for range 100 {
		if s, c := d.LookupOut(1, pkt); s != nil || c != XfrmOutNoStates {
			t.Fatalf("LookupOut = %v, %v; want nil, XfrmOutNoStates", s, c)
		}
	}
	if n := d.Counters().Get(XfrmOutNoStates); n != 100 {
		t.Errorf("XfrmOutNoStates = %d, want 100", n)
	}
	want := Acquire{Policy: trap, Src: netip.MustParseAddr("192.0.2.1"), Dst: netip.MustParseAddr("203.0.113.7")}
	if a := got(); len(a) != 1 || a[0] != want {
		t.Fatalf("acquires %+v, want one: %+v", a, want)
	}

	// Another policy's change keeps the rate limit of this one.
	other := Policy{Dir: DirOut, IfID: 1, Selector: sel("192.0.2.0/24", "198.51.100.0/24"), Action: ActionAllow}
	if err := d.AddPolicy(other); err != nil {
		t.Fatal(err)
	}
	d.LookupOut(1, pkt)
	if a := got(); len(a) != 1 {
		t.Fatalf("a change of the SAD restarted the interval: %d acquires", len(a))
	}
	// The other policy has a rate limit of its own.
	d.LookupOut(1, v4to("198.51.100.9"))
	if a := got(); len(a) != 2 || a[1].Policy != other {
		t.Fatalf("acquires %+v, want a second for %+v", a, other)
	}

	// Once the child's SA is in, packets use it and ask nothing.
	s := newOut(t, 0x100, 1, trap.Selector)
	if err := d.Add(s); err != nil {
		t.Fatal(err)
	}
	if got, c := d.LookupOut(1, pkt); got != s || c != CounterNone {
		t.Fatalf("LookupOut after the SA came = %v, %v", got, c)
	}
	if a := got(); len(a) != 2 {
		t.Fatalf("%d acquires, want still 2", len(a))
	}
}

// TestAcquireOnlyForAllow: a block policy, a packet no policy matches,
// and an interface without policies (its traffic needs no negotiation:
// it is the static-SA case) raise no Acquire.
func TestAcquireOnlyForAllow(t *testing.T) {
	d, _, got := trapSAD(t, time.Hour)
	if err := d.AddPolicy(Policy{Dir: DirOut, IfID: 1, Selector: sel("192.0.2.0/24", "198.51.100.0/24"), Action: ActionBlock}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		ifID uint32
		dst  string
		want Counter
	}{
		{1, "198.51.100.1", XfrmOutPolBlock}, // the block policy
		{1, "10.0.0.1", XfrmOutPolBlock},     // no policy matches
		{2, "203.0.113.1", XfrmOutNoStates},  // no policies, no SAs
	} {
		if s, c := d.LookupOut(tt.ifID, v4to(tt.dst)); s != nil || c != tt.want {
			t.Errorf("if_id %d to %s: got %v, %v; want %v", tt.ifID, tt.dst, s, c, tt.want)
		}
	}
	if a := got(); len(a) != 0 {
		t.Fatalf("acquires %+v, want none", a)
	}
}

// TestAcquireInterval: after the interval the same policy asks again; a
// policy deleted and added again starts afresh.
func TestAcquireInterval(t *testing.T) {
	d, trap, got := trapSAD(t, 20*time.Millisecond)
	pkt := v4to("203.0.113.7")
	d.LookupOut(1, pkt)
	d.LookupOut(1, pkt)
	if n := len(got()); n != 1 {
		t.Fatalf("%d acquires within the interval, want 1", n)
	}
	time.Sleep(30 * time.Millisecond)
	d.LookupOut(1, pkt)
	if n := len(got()); n != 2 {
		t.Fatalf("%d acquires after the interval, want 2", n)
	}
	if err := d.DeletePolicy(trap); err != nil {
		t.Fatal(err)
	}
	if err := d.AddPolicy(trap); err != nil {
		t.Fatal(err)
	}
	d.LookupOut(1, pkt)
	if n := len(got()); n != 3 {
		t.Fatalf("%d acquires after the policy was installed again, want 3", n)
	}
}

// TestAcquireConcurrent: workers that miss on one policy at once raise
// one Acquire between them.
func TestAcquireConcurrent(t *testing.T) {
	d, _, got := trapSAD(t, time.Hour)
	var wg sync.WaitGroup
	var misses atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pkt := v4to("203.0.113.7")
			for range 1000 {
				if s, _ := d.LookupOut(1, pkt); s == nil {
					misses.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if a := got(); len(a) != 1 || misses.Load() != 8000 {
		t.Fatalf("%d acquires for %d misses, want 1 for 8000", len(a), misses.Load())
	}
}

// TestAcquireAllocs: a miss on a policy that already asked allocates
// nothing (the hot path of a flood towards a trap).
func TestAcquireAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	d, _, _ := trapSAD(t, time.Hour)
	pkt := v4to("203.0.113.7")
	d.LookupOut(1, pkt)
	if n := testing.AllocsPerRun(1000, func() { d.LookupOut(1, pkt) }); n != 0 {
		t.Fatalf("%v allocations per miss, want 0", n)
	}
}
