package xfrmif

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/internal/blocktest"
)

func TestRegistryAddLookupRemove(t *testing.T) {
	var r Registry
	if got := r.Lookup(1); got != nil {
		t.Fatalf("empty Lookup(1) = %v, want nil", got)
	}
	a, b := mustFake(t, "ipsec1", 1), mustFake(t, "ipsec2", 2)
	if err := r.Add(a); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(b); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		ifc  *Interface
	}{
		{"same if_id", mustFake(t, "ipsec9", 1)},
		{"same name", mustFake(t, "ipsec2", 9)},
	} {
		if err := r.Add(tt.ifc); !errors.Is(err, ErrExists) {
			t.Errorf("%s: Add = %v, want ErrExists", tt.name, err)
		}
	}
	if got := r.Lookup(1); got != a {
		t.Errorf("Lookup(1) = %v, want ipsec1", got)
	}
	if got := r.Lookup(2); got != b {
		t.Errorf("Lookup(2) = %v, want ipsec2", got)
	}
	if got := r.Lookup(3); got != nil {
		t.Errorf("Lookup(3) = %v, want nil", got)
	}
	if got := r.Remove(1); got != a {
		t.Errorf("Remove(1) = %v, want ipsec1", got)
	}
	if got := r.Lookup(1); got != nil {
		t.Errorf("Lookup(1) after Remove = %v, want nil", got)
	}
	if got := r.Remove(1); got != nil {
		t.Errorf("second Remove(1) = %v, want nil", got)
	}
	if got := r.Len(); got != 1 {
		t.Errorf("Len = %d, want 1", got)
	}
}

// TestRegistryConcurrent looks interfaces up from several goroutines while
// others are added and removed; run with -race.
func TestRegistryConcurrent(t *testing.T) {
	var r Registry
	const stable, churn = 100, 100
	for i := range stable {
		if err := r.Add(mustFake(t, fmt.Sprintf("s%d", i), uint32(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var lookups atomic.Int64
	for w := range 4 {
		wg.Go(func() {
			n := 0
			for !stop.Load() {
				id := uint32(n%(stable+churn) + 1)
				ifc := r.Lookup(id)
				if id <= stable && ifc == nil {
					t.Errorf("worker %d: Lookup(%d) = nil for a stable interface", w, id)
					return
				}
				if ifc != nil && ifc.IfID() != id {
					t.Errorf("worker %d: Lookup(%d) returned if_id %d", w, id, ifc.IfID())
					return
				}
				n++
			}
			lookups.Add(int64(n))
		})
	}
	for round := range 20 {
		for i := range churn {
			id := uint32(stable + i + 1)
			if err := r.Add(mustFake(t, fmt.Sprintf("c%d", i), id)); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		for i := range churn {
			r.Remove(uint32(stable + i + 1))
		}
	}
	stop.Store(true)
	wg.Wait()
	if r.Len() != stable {
		t.Errorf("Len = %d, want %d", r.Len(), stable)
	}
	t.Logf("%d lookups during 4,000 adds and removes", lookups.Load())
}

func registryOf(tb testing.TB, n int) *Registry {
	var r Registry
	ifcs := make([]*Interface, n)
	for i := range ifcs {
		// Interfaces need no link to be looked up.
		ifcs[i] = &Interface{name: fmt.Sprintf("x%d", i), ifID: uint32(i + 1)}
	}
	if err := r.AddAll(ifcs...); err != nil {
		tb.Fatal(err)
	}
	return &r
}

func TestLookupAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	for _, n := range []int{1, 1000, 100000} {
		r := registryOf(t, n)
		id := uint32(n/2 + 1)
		if got := testing.AllocsPerRun(1000, func() {
			if r.Lookup(id) == nil {
				panic("missing")
			}
			r.Lookup(0)
		}); got != 0 {
			t.Errorf("%d interfaces: Lookup allocates %v times, want 0", n, got)
		}
	}
}

func BenchmarkLookup(b *testing.B) {
	for _, n := range []int{1, 1000, 100000} {
		b.Run(fmt.Sprintf("interfaces=%d", n), func(b *testing.B) {
			r := registryOf(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := uint32(0)
				for pb.Next() {
					i = i*1664525 + 1013904223 // spread over the table
					if r.Lookup(i%uint32(n)+1) == nil {
						panic("missing")
					}
				}
			})
		})
	}
}

func prefixes(ss ...string) []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range ss {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}

func TestSync(t *testing.T) {
	r, link := fakeRegistry()
	first := []Config{
		{Name: "keep", IfID: 1, Addresses: prefixes("192.0.2.1/24"), Routes: prefixes("198.51.100.0/24")},
		{Name: "change", IfID: 2, MTU: 1400, Addresses: prefixes("192.0.2.65/26", "2001:db8:1::1/64")},
		{Name: "gone", IfID: 3},
		{Name: "requeue", IfID: 4, Queues: 1},
		{Name: "renumber", IfID: 5},
		{Name: "retable", IfID: 8, Routes: prefixes("192.0.2.2/32")},
	}
	res, err := r.Sync(first)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"change", "gone", "keep", "renumber", "requeue", "retable"}; !slices.Equal(res.Added, want) {
		t.Errorf("first Sync added %v, want %v", res.Added, want)
	}
	keep, change := r.Lookup(1), r.Lookup(2)
	keepLink, changeLink, goneLink := link("keep"), link("change"), link("gone")
	callsBefore := keepLink.calls

	second := []Config{
		first[0],
		{Name: "change", IfID: 2, MTU: 1300, Addresses: prefixes("192.0.2.65/26"), Routes: prefixes("203.0.113.0/24")},
		{Name: "requeue", IfID: 4, Queues: 2},
		{Name: "renumber", IfID: 6},
		{Name: "new", IfID: 7},
		// Another routing table: its routes move, on a new device.
		{Name: "retable", IfID: 8, Routes: prefixes("192.0.2.2/32"), Table: 100},
	}
	res, err = r.Sync(second)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		what      string
		got, want []string
	}{
		{"added", res.Added, []string{"new", "renumber"}},
		{"removed", res.Removed, []string{"gone", "renumber"}},
		{"reconfigured", res.Reconfigured, []string{"change"}},
		{"replaced", res.Replaced, []string{"requeue", "retable"}},
		{"unchanged", res.Unchanged, []string{"keep"}},
	} {
		if !slices.Equal(tt.got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.what, tt.got, tt.want)
		}
	}
	if r.Lookup(1) != keep || r.Lookup(2) != change {
		t.Error("kept interfaces were replaced, want the same *Interface")
	}
	if keepLink.calls != callsBefore || keepLink.isClosed() {
		t.Errorf("unchanged interface touched: %d calls, closed %v", keepLink.calls-callsBefore, keepLink.isClosed())
	}
	if !goneLink.isClosed() {
		t.Error("removed interface's link not closed")
	}
	if r.Lookup(3) != nil || r.Lookup(5) != nil {
		t.Error("removed if_ids still published")
	}
	if got := r.Lookup(4); got == nil || got.NumQueues() != 2 {
		t.Errorf("requeue: %v, want 2 queues", got)
	}
	if got := r.Lookup(8); got == nil || got.Config().Table != 100 {
		t.Errorf("retable: %v, want table 100", got)
	}
	if got := r.Lookup(6); got == nil || got.Name() != "renumber" {
		t.Errorf("Lookup(6) = %v, want renumber", got)
	}
	if changeLink.mtu != 1300 || !slices.Equal(changeLink.addrs, prefixes("192.0.2.65/26")) || !slices.Equal(changeLink.routes, prefixes("203.0.113.0/24")) {
		t.Errorf("change: link has mtu %d addrs %v routes %v", changeLink.mtu, changeLink.addrs, changeLink.routes)
	}
	if got := change.Config(); got.MTU != 1300 || len(got.Addresses) != 1 || len(got.Routes) != 1 {
		t.Errorf("change: Config() = %+v", got)
	}

	// An invalid set changes nothing.
	bad := append(slices.Clone(second), Config{Name: "dup", IfID: 1})
	if _, err := r.Sync(bad); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("Sync with a duplicate if_id = %v, want ErrInvalidConfig", err)
	}
	if r.Len() != len(second) {
		t.Errorf("Len after refused Sync = %d, want %d", r.Len(), len(second))
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if r.Len() != 0 || !keepLink.isClosed() {
		t.Error("Close left interfaces")
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"minimal", Config{Name: "ipsec1", IfID: 1}, true},
		{"no name", Config{IfID: 1}, false},
		{"long name", Config{Name: "ipsec0123456789ab", IfID: 1}, false},
		{"if_id 0", Config{Name: "ipsec1"}, false},
		{"mtu 40", Config{Name: "ipsec1", IfID: 1, MTU: 40}, false},
		{"mtu 100, below what config takes", Config{Name: "ipsec1", IfID: 1, MTU: 100}, false},
		{"mtu 576", Config{Name: "ipsec1", IfID: 1, MTU: 576}, true},
		{"ipv6 under 1280", Config{Name: "ipsec1", IfID: 1, MTU: 1200, Addresses: prefixes("2001:db8::1/64")}, false},
		{"ipv6 route under 1280", Config{Name: "ipsec1", IfID: 1, MTU: 1200, Routes: prefixes("2001:db8::/32")}, false},
		{"257 queues", Config{Name: "ipsec1", IfID: 1, Queues: 257}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if (err == nil) != tt.ok {
				t.Errorf("Validate() = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

// TestReadQueueAndWriteQueue: ReadQueue reads a queue at an offset and
// counts what it read as tx; WriteQueue writes through a queue and counts
// rx, from many goroutines at once; both refuse an offset without room
// for the TUN's header, and return ErrClosed after Close, a blocked read
// included.
func TestReadQueueAndWriteQueue(t *testing.T) {
	l := newFakeLink(2)
	ifc, err := NewInterface(Config{Name: "ipsec1", IfID: 1, Queues: 2}, l)
	if err != nil {
		t.Fatal(err)
	}
	if got := ifc.QueueBatchSize(1); got != 4 {
		t.Errorf("QueueBatchSize(1) = %d, want the fake queue's 4", got)
	}
	bufs := [][]byte{make([]byte, 64+1500), make([]byte, 64+1500), make([]byte, 64+1500), make([]byte, 64+1500)}
	sizes := make([]int, len(bufs))
	q1 := l.queues[1].(*fakeQueue)
	for _, want := range []string{"one", "two"} {
		q1.in <- []byte(want)
		n, err := ifc.ReadQueue(1, bufs, sizes, 64)
		if err != nil || n != 1 {
			t.Fatalf("ReadQueue = %d, %v, want 1 packet", n, err)
		}
		if got := string(bufs[0][64 : 64+sizes[0]]); got != want {
			t.Errorf("read %q, want %q", got, want)
		}
	}
	if _, err := ifc.ReadQueue(1, bufs, sizes, MinOffset-1); err == nil {
		t.Errorf("ReadQueue at offset %d succeeded, want an error (offset < MinOffset)", MinOffset-1)
	}

	// Concurrent writes through both queues are all counted.
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for range 100 {
				buf := append(make([]byte, 16), fmt.Sprint("w", w)...)
				if _, err := ifc.WriteQueue(w%2, [][]byte{buf, buf}, 16); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	st := ifc.Stats()
	if st.RxPackets != 800 || st.TxPackets != 2 || st.TxBytes != 6 {
		t.Errorf("Stats = %+v, want 800 rx and 2 tx packets (6 bytes)", st)
	}
	if _, err := ifc.WriteQueue(0, [][]byte{make([]byte, 20)}, 4); err == nil {
		t.Error("WriteQueue at offset 4 succeeded, want an error (offset < MinOffset)")
	}

	done := make(chan error, 1)
	go func() {
		_, err := ifc.ReadQueue(0, bufs, sizes, 64)
		done <- err
	}()
	blocktest.Wait(t, "(*fakeQueue).Read")
	if err := ifc.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("blocked ReadQueue after Close = %v, want ErrClosed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a blocked ReadQueue did not return after Close")
	}
	if _, err := ifc.WriteQueue(0, [][]byte{make([]byte, 20)}, 10); !errors.Is(err, ErrClosed) {
		t.Errorf("WriteQueue after Close = %v, want ErrClosed", err)
	}
	if st := ifc.Stats(); st.TxErrors != 0 {
		t.Errorf("TxErrors = %d after a read ended by Close, want 0", st.TxErrors)
	}
}
