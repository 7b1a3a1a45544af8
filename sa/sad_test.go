package sa

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"
)

func newOut(t testing.TB, spi, ifID uint32, sel Selector) *SA {
	t.Helper()
	s, err := New(Config{Src: outer4a, Dst: outer4b, SPI: spi, Dir: DirOut, Mode: ModeTunnel, IfID: ifID,
		Selector: sel, AEAD: &Algorithm{Name: AlgGCM, Key: seqKey(20, 0)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func sel(src, dst string) Selector {
	var s Selector
	if src != "" {
		s.Src = netip.MustParsePrefix(src)
	}
	if dst != "" {
		s.Dst = netip.MustParsePrefix(dst)
	}
	return s
}

func v4to(dst string) []byte {
	p := ipv4Packet(8)
	copy(p[16:20], netip.MustParseAddr(dst).AsSlice())
	return p
}

func TestLookupOut(t *testing.T) {
	d := NewSAD(nil)
	def := newOut(t, 0x100, 1, Selector{})
	wide := newOut(t, 0x101, 1, sel("", "203.0.113.0/24"))
	narrow := newOut(t, 0x102, 1, sel("", "203.0.113.128/25"))
	host := newOut(t, 0x103, 1, sel("192.0.2.9/32", "203.0.113.200/32")) // only from 192.0.2.9
	other := newOut(t, 0x104, 2, sel("", "203.0.113.0/24"))
	v6 := newOut(t, 0x105, 1, sel("", "2001:db8:2::/48"))
	for _, s := range []*SA{def, wide, narrow, host, other, v6} {
		if err := d.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		ifID  uint32
		pkt   []byte
		want  *SA
		wantC Counter
	}{
		{"default", 1, v4to("198.51.100.7"), def, CounterNone},
		{"/24", 1, v4to("203.0.113.7"), wide, CounterNone},
		{"/25 beats /24", 1, v4to("203.0.113.130"), narrow, CounterNone},
		{"/32 with wrong src falls back to /25", 1, v4to("203.0.113.200"), narrow, CounterNone},
		{"other interface", 2, v4to("203.0.113.7"), other, CounterNone},
		{"other interface, no default", 2, v4to("198.51.100.7"), nil, XfrmOutNoStates},
		{"unknown interface", 9, v4to("203.0.113.7"), nil, XfrmOutNoStates},
		{"ipv6", 1, ipv6Packet(8), v6, CounterNone},
		{"not ip", 1, []byte{0x10, 0}, nil, XfrmOutError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, c := d.LookupOut(tt.ifID, tt.pkt)
			if got != tt.want || c != tt.wantC {
				t.Errorf("LookupOut = %v, %v; want %v, %v", got, c, tt.want, tt.wantC)
			}
			// The segments of a super-packet: one lookup, the
			// same answer, a drop counted once per segment.
			before := d.counters.Get(tt.wantC)
			got, c = d.LookupOutSegments(tt.ifID, tt.pkt, 5)
			if got != tt.want || c != tt.wantC {
				t.Errorf("LookupOutSegments = %v, %v; want %v, %v", got, c, tt.want, tt.wantC)
			}
			if n := d.counters.Get(tt.wantC) - before; tt.wantC != CounterNone && n != 5 {
				t.Errorf("LookupOutSegments of 5 segments counted %v %d times, want 5", tt.wantC, n)
			}
		})
	}
	// The selector's source prefix matters.
	p := v4to("203.0.113.200")
	copy(p[12:16], []byte{192, 0, 2, 9})
	if got, _ := d.LookupOut(1, p); got != host {
		t.Errorf("LookupOut from 192.0.2.9 = %v, want %v", got, host)
	}
	// Make-before-break: a newer SA with the same selector wins.
	newer := newOut(t, 0x200, 1, sel("", "203.0.113.0/24"))
	if err := d.Add(newer); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.LookupOut(1, v4to("203.0.113.7")); got != newer {
		t.Errorf("after rekey LookupOut = %v, want the newer %v", got, newer)
	}
	if err := d.Delete(DirOut, 0x200, netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.LookupOut(1, v4to("203.0.113.7")); got != wide {
		t.Errorf("after delete LookupOut = %v, want %v", got, wide)
	}
	// Two cases, each by LookupOut and by LookupOutSegments of 5.
	if c := d.Counters().Get(XfrmOutNoStates); c != 2+2*5 {
		t.Errorf("XfrmOutNoStates = %d, want 12", c)
	}
}

func TestPolicies(t *testing.T) {
	d := NewSAD(nil)
	s := newOut(t, 0x100, 1, Selector{})
	if err := d.Add(s); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.LookupOut(1, v4to("203.0.113.7")); got != s {
		t.Fatalf("without policies: %v", got)
	}
	pols := []Policy{
		{Dir: DirOut, IfID: 1, Selector: sel("", "203.0.113.128/25"), Action: ActionBlock},
		{Dir: DirOut, IfID: 1, Selector: sel("192.0.2.0/24", "203.0.113.0/24"), Action: ActionAllow},
	}
	for _, p := range pols {
		if err := d.AddPolicy(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.AddPolicy(pols[0]); !errors.Is(err, ErrExists) {
		t.Errorf("duplicate policy: %v, want ErrExists", err)
	}
	tests := []struct {
		dst   string
		want  *SA
		wantC Counter
	}{
		{"203.0.113.7", s, CounterNone},
		{"203.0.113.130", nil, XfrmOutPolBlock},
		{"198.51.100.1", nil, XfrmOutPolBlock}, // no policy matches
	}
	for _, tt := range tests {
		if got, c := d.LookupOut(1, v4to(tt.dst)); got != tt.want || c != tt.wantC {
			t.Errorf("LookupOut(%s) = %v, %v; want %v, %v", tt.dst, got, c, tt.want, tt.wantC)
		}
	}
	if got := d.Policies(); len(got) != 2 {
		t.Errorf("Policies = %v", got)
	}
	if err := d.DeletePolicy(pols[0]); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.LookupOut(1, v4to("203.0.113.130")); got != s {
		t.Errorf("after DeletePolicy: %v, want %v", got, s)
	}
	if err := d.DeletePolicy(pols[0]); !errors.Is(err, ErrNotFound) {
		t.Errorf("second DeletePolicy: %v, want ErrNotFound", err)
	}
}

func TestSADInbound(t *testing.T) {
	d := NewSAD(nil)
	out, in := pair(t, ModeTunnel, false, false, 64, suites[0].set)
	if err := d.Add(in); err != nil {
		t.Fatal(err)
	}
	if err := d.Add(in); !errors.Is(err, ErrExists) {
		t.Errorf("duplicate Add: %v, want ErrExists", err)
	}
	if d.LookupIn(0x1001, netip.Addr{}) != in || d.LookupIn(0x1001, outer4b) != in || d.LookupIn(0x1001, outer4a) != nil || d.LookupIn(0x1002, netip.Addr{}) != nil {
		t.Error("LookupIn wrong")
	}
	good := sealOne(t, out, ipv4Packet(10))
	batch := []Packet{
		reseat(good),
		mkPacket([]byte{0, 0, 0x10, 2, 0, 0, 0, 1, 1, 2, 3, 4}), // unknown SPI
		reseat(sealOne(t, out, ipv4Packet(11))),
		reseat(good), // replay
		mkPacket([]byte{1, 2, 3}),
	}
	d.OpenBatch(batch)
	want := []Counter{CounterNone, XfrmInNoStates, CounterNone, XfrmInStateSeqError, XfrmInHdrError}
	for i, p := range batch {
		if p.Drop != want[i] {
			t.Errorf("packet %d: Drop = %v, want %v", i, p.Drop, want[i])
		}
	}
	for _, c := range []Counter{XfrmInNoStates, XfrmInStateSeqError, XfrmInHdrError} {
		if got := d.Counters().Get(c); got != 0 && in.counters.Get(c)+d.Counters().Get(c) != 1 {
			t.Errorf("%v counted %d (SA) + %d (SAD), want once", c, in.counters.Get(c), got)
		}
	}
	// Inbound policies.
	if err := d.AddPolicy(Policy{Dir: DirIn, IfID: 1, Selector: sel("192.0.2.0/24", ""), Action: ActionBlock}); err != nil {
		t.Fatal(err)
	}
	batch = []Packet{reseat(sealOne(t, out, ipv4Packet(12)))}
	d.OpenBatch(batch)
	if batch[0].Drop != XfrmInPolBlock {
		t.Errorf("blocked by in policy: Drop = %v", batch[0].Drop)
	}
	if err := d.Delete(DirIn, 0x1001, netip.Addr{}); err != nil || d.LookupIn(0x1001, netip.Addr{}) != nil {
		t.Errorf("Delete: %v", err)
	}
	if err := d.Delete(DirIn, 0x1001, netip.Addr{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Delete: %v", err)
	}
}

// manySAs makes n outbound SAs on n interfaces and n inbound SAs, with
// /32 selectors, for the scale tests.
func manySAs(t testing.TB, n int) []*SA {
	key := &Algorithm{Name: AlgGCM, Key: seqKey(20, 0)}
	all := make([]*SA, 0, 2*n)
	for i := 0; i < n; i++ {
		dst := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		for _, dir := range []Dir{DirOut, DirIn} {
			s, err := New(Config{Src: outer4a, Dst: outer4b, SPI: uint32(0x1000 + i), Dir: dir, Mode: ModeTunnel,
				IfID: uint32(i + 1), Selector: Selector{Dst: netip.PrefixFrom(dst, 32)}, AEAD: key}, nil)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, s)
		}
	}
	return all
}

func TestReplaceMany(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 1000
	}
	all := manySAs(t, n)
	d := NewSAD(nil)
	if err := d.Replace(all, nil); err != nil {
		t.Fatal(err)
	}
	if got := len(d.States()); got != 2*n {
		t.Fatalf("States: %d, want %d", got, 2*n)
	}
	i := n / 2
	pkt := v4to(fmt.Sprintf("10.%d.%d.%d", byte(i>>16), byte(i>>8), byte(i)))
	if s, c := d.LookupOut(uint32(i+1), pkt); s == nil || s.SPI() != uint32(0x1000+i) {
		t.Errorf("LookupOut = %v, %v", s, c)
	}
	if s := d.LookupIn(uint32(0x1000+i), netip.Addr{}); s == nil || s.Dir() != DirIn {
		t.Errorf("LookupIn = %v", s)
	}
	if err := d.Replace(append(all, all[0]), nil); !errors.Is(err, ErrExists) {
		t.Errorf("Replace with a duplicate: %v, want ErrExists", err)
	}
}

// TestLookupOutTransport checks that a transport-mode SA only seals packets
// whose own addresses are the SA's: the peer rebuilds the IP header from
// the SA, so anything else (another family, another host) must not use it.
func TestLookupOutTransport(t *testing.T) {
	d := NewSAD(nil)
	s, err := New(Config{Src: netip.MustParseAddr("192.0.2.1"), Dst: netip.MustParseAddr("203.0.113.1"), SPI: 0x100,
		Dir: DirOut, Mode: ModeTransport, IfID: 1, AEAD: &Algorithm{Name: AlgGCM, Key: seqKey(20, 0)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Add(s); err != nil {
		t.Fatal(err)
	}
	fromOther := ipv4Packet(8)
	copy(fromOther[12:16], []byte{192, 0, 2, 9})
	tests := []struct {
		name  string
		pkt   []byte
		want  *SA
		wantC Counter
	}{
		{"own addresses", ipv4Packet(8), s, CounterNone}, // 192.0.2.1 -> 203.0.113.1
		{"other destination", v4to("203.0.113.2"), nil, XfrmOutNoStates},
		{"other source", fromOther, nil, XfrmOutNoStates},
		{"other family", ipv6Packet(8), nil, XfrmOutNoStates},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, c := d.LookupOut(1, tt.pkt); got != tt.want || c != tt.wantC {
				t.Errorf("LookupOut = %v, %v; want %v, %v", got, c, tt.want, tt.wantC)
			}
		})
	}
}

// TestSPIConflicts: inbound SAs are found by SPI alone, so a second
// inbound SA with a taken SPI is refused even to another destination,
// by Add and by Replace; outbound SAs may share an SPI across
// destinations.
func TestSPIConflicts(t *testing.T) {
	mk := func(dir Dir, dst netip.Addr) *SA {
		t.Helper()
		s, err := New(Config{Src: outer4a, Dst: dst, SPI: 0x1001, Dir: dir, Mode: ModeTunnel, IfID: 1,
			AEAD: &Algorithm{Name: AlgGCM, Key: seqKey(20, 0)}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	other := netip.MustParseAddr("198.51.100.9")
	for _, tt := range []struct {
		name   string
		dir    Dir
		wantOK bool
	}{
		{"inbound", DirIn, false},
		{"outbound", DirOut, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := NewSAD(nil)
			if err := d.Add(mk(tt.dir, outer4b)); err != nil {
				t.Fatal(err)
			}
			err := d.Add(mk(tt.dir, other))
			if tt.wantOK && err != nil {
				t.Errorf("Add to another destination: %v, want it added", err)
			}
			if !tt.wantOK && !errors.Is(err, ErrExists) {
				t.Errorf("Add to another destination: %v, want ErrExists", err)
			}
			err = NewSAD(nil).Replace([]*SA{mk(tt.dir, outer4b), mk(tt.dir, other)}, nil)
			if tt.wantOK != (err == nil) || (err != nil && !errors.Is(err, ErrExists)) {
				t.Errorf("Replace with both: %v, want ok %v", err, tt.wantOK)
			}
		})
	}
}
