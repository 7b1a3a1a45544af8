package sa

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
)

func v6to(dst string) []byte {
	p := ipv6Packet(8)
	copy(p[24:40], netip.MustParseAddr(dst).AsSlice())
	return p
}

// TestLookupOutSharedKeys: prefixes of one length whose index keys are the
// same (0.0.0.0 and 0.0.0.1, since key 0 moves to 1), and /0 beside SAs
// without a destination, still find the SA whose selector matches.
func TestLookupOutSharedKeys(t *testing.T) {
	if a, b := prefixKey(netip.MustParsePrefix("0.0.0.0/32")), prefixKey(netip.MustParsePrefix("0.0.0.1/32")); a != b {
		t.Fatalf("prefixKey: %#x and %#x, want the same key for this test", a, b)
	}
	d := NewSAD(nil)
	zero := newOut(t, 0x100, 1, sel("", "0.0.0.0/32"))
	one := newOut(t, 0x101, 1, sel("", "0.0.0.1/32"))
	all := newOut(t, 0x102, 1, sel("", "0.0.0.0/0"))
	anyDst := newOut(t, 0x103, 1, Selector{})
	net6 := newOut(t, 0x104, 1, sel("", "2001:db8:2::/48"))
	other6 := newOut(t, 0x105, 1, sel("", "2001:db8:3::/48"))
	host6 := newOut(t, 0x106, 1, sel("", "2001:db8:2::1/128"))
	for _, s := range []*SA{zero, one, all, anyDst, net6, other6, host6} {
		if err := d.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		pkt  []byte
		want *SA
	}{
		{"0.0.0.0/32", v4to("0.0.0.0"), zero},
		{"0.0.0.1/32", v4to("0.0.0.1"), one},
		{"/0 beats no destination", v4to("203.0.113.7"), all},
		{"/128", v6to("2001:db8:2::1"), host6},
		{"/48", v6to("2001:db8:2::2"), net6},
		{"other /48", v6to("2001:db8:3::2"), other6},
		{"no v6 prefix: no destination", v6to("2001:db8:4::1"), anyDst},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, c := d.LookupOut(1, tt.pkt); got != tt.want {
				t.Errorf("LookupOut = %v, %v; want %v", got, c, tt.want)
			}
		})
	}
	if err := d.Delete(DirOut, 0x100, netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.LookupOut(1, v4to("0.0.0.0")); got != all {
		t.Errorf("after deleting 0.0.0.0/32: LookupOut = %v, want %v", got, all)
	}
	if got, _ := d.LookupOut(1, v4to("0.0.0.1")); got != one {
		t.Errorf("after deleting 0.0.0.0/32: LookupOut(0.0.0.1) = %v, want %v", got, one)
	}
}

// TestIfIDZero: the SAD does not refuse if_id 0 (the daemon does), and
// its interface works like any other.
func TestIfIDZero(t *testing.T) {
	d := NewSAD(nil)
	s := newOut(t, 0x100, 0, Selector{})
	if err := d.Add(s); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.LookupOut(0, v4to("203.0.113.7")); got != s {
		t.Errorf("LookupOut(0) = %v, want %v", got, s)
	}
	if got, c := d.LookupOut(1, v4to("203.0.113.7")); got != nil || c != XfrmOutNoStates {
		t.Errorf("LookupOut(1) = %v, %v; want nil, XfrmOutNoStates", got, c)
	}
	p := Policy{Dir: DirOut, IfID: 0, Selector: sel("", "203.0.113.0/24"), Action: ActionBlock}
	if err := d.AddPolicy(p); err != nil {
		t.Fatal(err)
	}
	if got, c := d.LookupOut(0, v4to("203.0.113.7")); got != nil || c != XfrmOutPolBlock {
		t.Errorf("with a block policy: LookupOut(0) = %v, %v; want nil, XfrmOutPolBlock", got, c)
	}
	if err := d.Replace([]*SA{s}, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.LookupOut(0, v4to("203.0.113.7")); got != s {
		t.Errorf("after Replace: LookupOut(0) = %v, want %v", got, s)
	}
}

// TestSADAddDeleteMany adds and deletes SAs one at a time, so that shards
// grow, shrink and shift entries back, and checks every lookup on the way.
func TestSADAddDeleteMany(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 600
	}
	d := NewSAD(nil)
	all := manySAs(t, n)
	for _, s := range all {
		if err := d.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	check := func(alive func(i int) bool) {
		t.Helper()
		for i := range n {
			var a [4]byte
			binary.BigEndian.PutUint32(a[:], 10<<24|uint32(i))
			wantIn, wantOut := all[2*i+1], all[2*i]
			if !alive(i) {
				wantIn, wantOut = nil, nil
			}
			if got := d.LookupIn(uint32(0x1000+i), netip.Addr{}); got != wantIn {
				t.Fatalf("LookupIn(%#x) = %v, want %v", 0x1000+i, got, wantIn)
			}
			if got, _ := d.LookupOut(uint32(i+1), v4to(netip.AddrFrom4(a).String())); got != wantOut {
				t.Fatalf("LookupOut(%d) = %v, want %v", i+1, got, wantOut)
			}
		}
	}
	check(func(int) bool { return true })
	for i := 0; i < n; i += 2 {
		for _, dir := range []Dir{DirIn, DirOut} {
			if err := d.Delete(dir, uint32(0x1000+i), netip.Addr{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	check(func(i int) bool { return i%2 == 1 })
	if got, want := len(d.States()), n; got != want {
		t.Errorf("States: %d, want %d", got, want)
	}
	for i := 1; i < n; i += 2 {
		for _, dir := range []Dir{DirIn, DirOut} {
			if err := d.Delete(dir, uint32(0x1000+i), netip.Addr{}); err != nil {
				t.Fatal(fmt.Errorf("delete %d: %w", i, err))
			}
		}
	}
	check(func(int) bool { return false })
}
