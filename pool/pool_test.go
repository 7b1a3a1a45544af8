package pool

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var (
	any4  = netip.IPv4Unspecified()
	any6  = netip.IPv6Unspecified()
	peer1 = netip.MustParseAddrPort("198.51.100.1:4500")
	peer2 = netip.MustParseAddrPort("198.51.100.2:4500")
)

func newPool(t testing.TB, name, addrs string) *Pool {
	t.Helper()
	r, err := ParseRange(addrs)
	if err != nil {
		t.Fatal(err)
	}
	return New(name, r)
}

func acquire(t testing.TB, p *Pool, id string) netip.Addr {
	t.Helper()
	a, err := p.Acquire(id, any4, peer1)
	if err != nil {
		t.Fatalf("Acquire(%s): %v", id, err)
	}
	return a
}

func TestReconnectGetsItsLeaseBack(t *testing.T) {
	p := newPool(t, "rw", "10.3.0.0/24")
	alice := acquire(t, p, "alice")
	dave := acquire(t, p, "dave")
	if alice.String() != "10.3.0.1" || dave.String() != "10.3.0.2" {
		t.Fatalf("got %s and %s, want 10.3.0.1 and 10.3.0.2", alice, dave)
	}
	if !p.Release("alice", alice) {
		t.Fatal("Release of alice's lease: not found")
	}
	if got := p.Stats(); got != (Stats{Size: 254, Online: 1, Offline: 1}) {
		t.Errorf("Stats() = %+v after alice left", got)
	}
	// Another client in between takes a new address, not alice's.
	if carol := acquire(t, p, "carol"); carol.String() != "10.3.0.3" {
		t.Errorf("carol got %s, want 10.3.0.3", carol)
	}
	if again := acquire(t, p, "alice"); again != alice {
		t.Errorf("alice got %s on reconnecting, want her lease %s back", again, alice)
	}
	if p.Release("alice", dave) || p.Release("nobody", alice) {
		t.Error("Release of a lease the identity does not hold succeeded")
	}
}

func TestSharedOnlineLease(t *testing.T) {
	p := newPool(t, "rw", "10.3.0.0/30")
	a := acquire(t, p, "alice")
	// The same client asking for its address again before its old SA is
	// gone shares it; another device with alice's credentials does not.
	if b, _ := p.Acquire("alice", a, peer1); b != a {
		t.Errorf("same peer requesting %s got %s", a, b)
	}
	if b, _ := p.Acquire("alice", a, peer2); b == a {
		t.Errorf("another peer requesting %s got it too", a)
	}
	// The shared address goes offline only when both SAs released it.
	p.Release("alice", a)
	if ls := p.Leases(); !ls[0].Online {
		t.Errorf("after one release: %+v, want %s still online", ls, a)
	}
	p.Release("alice", a)
	if ls := p.Leases(); ls[0].Online {
		t.Errorf("after two releases: %+v, want %s offline", ls, a)
	}
}

func TestExhaustedThenReassigned(t *testing.T) {
	p := newPool(t, "small", "10.3.0.10-10.3.0.12")
	var got []netip.Addr
	for i := range 3 {
		got = append(got, acquire(t, p, fmt.Sprintf("user%d", i)))
	}
	_, err := p.Acquire("late", any4, peer1)
	if !errors.Is(err, ErrExhausted) || !strings.Contains(err.Error(), "small") {
		t.Fatalf("Acquire from a full pool: %v, want ErrExhausted naming the pool", err)
	}
	// user1 then user0 go offline: a newcomer takes the lease that went
	// offline first.
	p.Release("user1", got[1])
	p.Release("user0", got[0])
	if a := acquire(t, p, "late"); a != got[1] {
		t.Errorf("late got %s, want %s (the oldest offline lease)", a, got[1])
	}
	if a := acquire(t, p, "user0"); a != got[0] {
		t.Errorf("user0 got %s, want its lease %s back", a, got[0])
	}
	// user1's lease is gone: it is online with late, and nothing is free.
	if _, err := p.Acquire("user1", any4, peer1); !errors.Is(err, ErrExhausted) {
		t.Errorf("user1 after its lease was reassigned: %v, want ErrExhausted", err)
	}
}

func TestFamily(t *testing.T) {
	s, err := NewSet(newPool(t, "rw4", "10.3.0.0/24"), newPool(t, "rw6", "fd00:3::/120"))
	if err != nil {
		t.Fatal(err)
	}
	a6, p, err := s.Acquire([]string{"rw4", "rw6"}, "alice", any6, peer1)
	if err != nil || a6.String() != "fd00:3::1" || p.Name() != "rw6" {
		t.Errorf("Acquire(::) = %s from %v, %v; want fd00:3::1 from rw6", a6, p, err)
	}
	if _, err := s.Pool("rw6").Acquire("alice", any4, peer1); !errors.Is(err, ErrFamily) {
		t.Errorf("0.0.0.0 from an IPv6 pool: %v, want ErrFamily", err)
	}
	if _, _, err := s.Acquire([]string{"rw4"}, "alice", any6, peer1); !errors.Is(err, ErrFamily) {
		t.Errorf(":: from IPv4 pools: %v, want ErrFamily", err)
	}
	if _, err := NewSet(newPool(t, "a", "10.0.0.0/30"), newPool(t, "a", "10.1.0.0/30")); err == nil {
		t.Error("two pools of one name: no error")
	}
}

func TestSetAcquireNextPool(t *testing.T) {
	s, _ := NewSet(newPool(t, "one", "10.3.0.1/32"), newPool(t, "two", "10.3.1.1/32"))
	names := []string{"one", "two"}
	if a, p, err := s.Acquire(names, "alice", any4, peer1); err != nil || p.Name() != "one" || a.String() != "10.3.0.1" {
		t.Fatalf("first: %s %v %v", a, p, err)
	}
	if a, p, err := s.Acquire(names, "bob", any4, peer1); err != nil || p.Name() != "two" || a.String() != "10.3.1.1" {
		t.Fatalf("second: %s %v %v, want the next pool", a, p, err)
	}
	_, _, err := s.Acquire(names, "carol", any4, peer1)
	if !errors.Is(err, ErrExhausted) || !strings.Contains(err.Error(), "pool one") || !strings.Contains(err.Error(), "pool two") {
		t.Errorf("both full: %v, want ErrExhausted naming both", err)
	}
}

func TestFlushAndLoad(t *testing.T) {
	dir := t.TempDir()
	s, _ := NewSet(newPool(t, "rw", "10.3.0.0/24"), newPool(t, "rw6", "fd00:3::/120"))
	ids := []string{"alice", "bob", "carol", "dave", "eve"}
	addrs := map[string]netip.Addr{}
	for _, id := range ids {
		addrs[id], _, _ = s.Acquire([]string{"rw"}, id, any4, peer1)
	}
	a6, _, _ := s.Acquire([]string{"rw6"}, "alice", any6, peer1)
	s.Release("rw", "carol", addrs["carol"]) // offline
	s.Release("rw", "bob", addrs["bob"])
	if err := s.Flush(dir); err != nil {
		t.Fatal(err)
	}
	// Unchanged: Flush writes nothing.
	os.Remove(filepath.Join(dir, FileName))
	if err := s.Flush(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, FileName)); err == nil {
		t.Error("Flush wrote the file again with nothing changed")
	}
	s.Release("rw", "eve", addrs["eve"])
	if err := s.Flush(dir); err != nil {
		t.Fatal(err)
	}

	// The restarted gateway: a new set, with a pool gone and one whose
	// range no longer holds its leases.
	r, _ := NewSet(newPool(t, "rw", "10.3.0.0/24"), newPool(t, "rw6", "fd00:4::/120"))
	n, err := r.Load(dir)
	if err != nil || n != 5 {
		t.Fatalf("Load: %d, %v; want the 5 leases of rw", n, err)
	}
	// Every lease offline, kept for its identity, oldest offline reused first.
	if st := r.Pool("rw").Stats(); st.Online != 0 || st.Offline != 5 {
		t.Errorf("after Load: %+v, want 5 offline", st)
	}
	for _, id := range []string{"dave", "alice"} {
		if a, _, _ := r.Acquire([]string{"rw"}, id, any4, peer2); a != addrs[id] {
			t.Errorf("%s got %s after the restart, want %s", id, a, addrs[id])
		}
	}
	if a, _, _ := r.Acquire([]string{"rw6"}, "alice", any6, peer1); a == a6 {
		t.Errorf("alice got %s from a pool whose range changed", a)
	}
	// A newcomer gets an address never handed out, not someone's lease.
	if a, _, _ := r.Acquire([]string{"rw"}, "frank", any4, peer1); a.String() != "10.3.0.6" {
		t.Errorf("frank got %s, want 10.3.0.6", a)
	}
}

func TestLoadFillsGaps(t *testing.T) {
	dir := t.TempDir()
	data := `{"version":1,"pools":[{"name":"rw","addrs":"10.3.0.0/24","leases":[` +
		`{"id":"a","addr":"10.3.0.2"},{"id":"b","addr":"10.3.0.5"},{"id":"dup","addr":"10.3.0.5"},{"id":"out","addr":"10.9.0.1"}]}]}`
	os.WriteFile(filepath.Join(dir, FileName), []byte(data), 0o600)
	s, _ := NewSet(newPool(t, "rw", "10.3.0.0/24"))
	if n, err := s.Load(dir); err != nil || n != 2 {
		t.Fatalf("Load: %d, %v; want 2 (a duplicate and an address out of range left out)", n, err)
	}
	var got []string
	for i := range 5 {
		a, _, _ := s.Acquire([]string{"rw"}, fmt.Sprint("new", i), any4, peer1)
		got = append(got, a.String())
	}
	want := "[10.3.0.1 10.3.0.3 10.3.0.4 10.3.0.6 10.3.0.7]"
	if fmt.Sprint(got) != want {
		t.Errorf("newcomers got %v, want %s: the gaps first, then the addresses never handed out", got, want)
	}
}

func TestLoadBadFile(t *testing.T) {
	s, _ := NewSet(newPool(t, "rw", "10.3.0.0/24"))
	if n, err := s.Load(t.TempDir()); n != 0 || err != nil {
		t.Errorf("no file: %d, %v; want 0, nil", n, err)
	}
	for _, data := range []string{"{", `{"version":2,"pools":[]}`, `{"version":1,"pools":[{"name":"rw","leases":[{"id":"a","addr":"x"}]}]}`} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, FileName), []byte(data), 0o600)
		if _, err := s.Load(dir); err == nil || !strings.Contains(err.Error(), FileName) {
			t.Errorf("Load of %s: %v, want an error naming the file", data, err)
		}
	}
}

func TestReplaceKeepsLeases(t *testing.T) {
	s, _ := NewSet(newPool(t, "rw", "10.3.0.0/24"), newPool(t, "old", "10.5.0.0/24"))
	a := acquire(t, s.Pool("rw"), "alice")
	acquire(t, s.Pool("old"), "bob")
	// Same range: the same pool. Larger range: the leases move along.
	s.Replace(newPool(t, "rw", "10.3.0.0/24"))
	if ls := s.Pool("rw").Leases(); len(ls) != 1 || ls[0].Addr != a || s.Pool("old") != nil {
		t.Errorf("after a reload with the same range: %+v", ls)
	}
	s.Replace(newPool(t, "rw", "10.3.0.0/23"))
	if ls := s.Pool("rw").Leases(); len(ls) != 1 || ls[0].Addr != a || !ls[0].Online {
		t.Errorf("after the range grew: %+v, want alice's lease online", ls)
	}
	if b := acquire(t, s.Pool("rw"), "bob"); b == a {
		t.Errorf("bob got alice's address %s", b)
	}
}

// TestManyLeases hands out and takes back a pool of 100,000 addresses:
// every lease distinct, every identity its own back.
func TestManyLeases(t *testing.T) {
	const n = 100_000
	p := newPool(t, "big", "10.0.0.0/15")
	seen := make(map[netip.Addr]bool, n)
	addrs := make([]netip.Addr, n)
	for i := range n {
		a := acquire(t, p, fmt.Sprint("user", i))
		if seen[a] {
			t.Fatalf("%s handed out twice", a)
		}
		seen[a], addrs[i] = true, a
	}
	for i := range n {
		p.Release(fmt.Sprint("user", i), addrs[i])
	}
	for i := n - 1; i >= 0; i -= 997 {
		if a := acquire(t, p, fmt.Sprint("user", i)); a != addrs[i] {
			t.Fatalf("user%d got %s, want %s", i, a, addrs[i])
		}
	}
}

func BenchmarkAcquireRelease(b *testing.B) {
	p := newPool(b, "big", "10.0.0.0/12")
	ids := make([]string, 100_000)
	for i := range ids {
		ids[i] = fmt.Sprint("user", i)
		acquire(b, p, ids[i])
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := ids[i%len(ids)]
		addr := p.r.Addr(uint32(i % len(ids)))
		p.Release(id, addr)
		if got, err := p.Acquire(id, any4, peer1); err != nil || got != addr {
			b.Fatalf("%s got %s, %v; want %s", id, got, err, addr)
		}
	}
}

// TestRetire: a pool with a lease online is not retired and says how
// many; one with none hands out nothing once retired (so that it can be
// removed with no client taking an address in between), and again once
// unretired.
func TestRetire(t *testing.T) {
	r, err := ParseRange("10.3.0.0/30")
	if err != nil {
		t.Fatal(err)
	}
	p := New("rw", r)
	peer := netip.MustParseAddrPort("192.0.2.1:500")
	a, err := p.Acquire("alice", netip.IPv4Unspecified(), peer)
	if err != nil {
		t.Fatal(err)
	}
	if n := p.Retire(); n != 1 {
		t.Fatalf("Retire with alice online: %d, want 1", n)
	}
	if _, err := p.Acquire("bob", netip.IPv4Unspecified(), peer); err != nil {
		t.Fatalf("Acquire after a Retire that did not retire: %v", err)
	}
	p.Release("alice", a)
	p.Release("bob", r.Addr(1))
	if n := p.Retire(); n != 0 {
		t.Fatalf("Retire with none online: %d, want 0", n)
	}
	if _, err := p.Acquire("carol", netip.IPv4Unspecified(), peer); !errors.Is(err, ErrRetired) || !strings.Contains(err.Error(), "pool rw") {
		t.Fatalf("Acquire from a retired pool: %v; want ErrRetired naming it", err)
	}
	p.Unretire()
	if _, err := p.Acquire("carol", netip.IPv4Unspecified(), peer); err != nil {
		t.Fatalf("Acquire after Unretire: %v", err)
	}
}

// TestReservedNeverHandedOut: the reserved addresses (the pool's DNS
// servers) are passed over among the gaps a leases file left and among
// those never handed out, a lease of one in the file is dropped, and a
// reload that reserves an address takes its lease away.
func TestReservedNeverHandedOut(t *testing.T) {
	r, _ := ParseRange("10.3.0.0/29") // 10.3.0.1-10.3.0.6
	dns := []netip.Addr{netip.MustParseAddr("10.3.0.2"), netip.MustParseAddr("10.3.0.5"), netip.MustParseAddr("192.0.2.53")}
	dir := t.TempDir()
	data := `{"version":1,"pools":[{"name":"rw","addrs":"10.3.0.0/29","leases":[{"id":"old","addr":"10.3.0.2"},{"id":"a","addr":"10.3.0.4"}]}]}`
	os.WriteFile(filepath.Join(dir, FileName), []byte(data), 0o600)
	s, _ := NewSet(New("rw", r, dns...))
	if n, err := s.Load(dir); err != nil || n != 1 {
		t.Fatalf("Load: %d, %v; want 1 (the lease of the DNS server's 10.3.0.2 dropped)", n, err)
	}
	p := s.Pool("rw")
	if st := p.Stats(); st.Size != 4 {
		t.Errorf("Stats().Size = %d, want 4 (6 less the 2 reserved)", st.Size)
	}
	var got []string
	for _, id := range []string{"a", "old", "b", "c"} {
		got = append(got, acquire(t, p, id).String())
	}
	if want := "[10.3.0.4 10.3.0.1 10.3.0.3 10.3.0.6]"; fmt.Sprint(got) != want {
		t.Errorf("leased %v, want %s", got, want)
	}
	if _, err := p.Acquire("d", any4, peer1); !errors.Is(err, ErrExhausted) || !strings.Contains(err.Error(), "all 4 addresses") {
		t.Errorf("with a, old, b and c online: %v, want ErrExhausted naming 4 addresses", err)
	}
	// A reload that reserves 10.3.0.4 too: a's lease is gone, and no
	// one gets it.
	p.Release("a", netip.MustParseAddr("10.3.0.4"))
	s.Replace(New("rw", r, append(dns, netip.MustParseAddr("10.3.0.4"))...))
	for _, l := range s.Pool("rw").Leases() {
		if l.Addr == netip.MustParseAddr("10.3.0.4") {
			t.Errorf("after the reload reserved 10.3.0.4: a lease %+v", l)
		}
	}
	if a, err := s.Pool("rw").Acquire("a", any4, peer1); err == nil {
		t.Errorf("a got %s from a pool whose every address is leased or reserved", a)
	}
}
