package sa

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/internal/iphdr"
)

// updateSelectors are the outbound selectors TestUpdateMatchesReplace
// draws from: nested and equal prefixes of both families, none, /0, two
// /32s that share an index key, traffic selector sets over ranges (many
// prefixes, one level several times), ports and protocols.
func updateSelectors(t *testing.T) []Selector {
	t.Helper()
	sets := [][2][]TS{
		{{anyTS("10.0.0.0/8")}, {tsRange("10.1.2.0", "10.1.2.9")}},
		{{anyTS("10.0.0.0/8")}, {ts("10.1.0.0/16", iphdr.ProtocolUDP, 0, 10)}},
		{{anyTS("10.0.0.0/8")}, {ts("10.1.0.0/16", iphdr.ProtocolTCP, 0, 0xffff)}},
		{{anyTS("2001:db8::/32")}, {tsRange("2001:db8:1::", "2001:db8:1::ff"), anyTS("2001:db8:2::/48")}},
	}
	sels := []Selector{{}, sel("", "0.0.0.0/0"), sel("", "10.0.0.0/8"), sel("", "10.1.0.0/16"),
		sel("", "10.1.2.0/24"), sel("", "10.1.2.3/32"), sel("", "10.1.2.4/32"), sel("10.9.0.0/16", "10.1.2.3/32"),
		sel("", "0.0.0.0/32"), sel("", "0.0.0.1/32"), sel("", "2001:db8::/32"), sel("", "2001:db8:1::/48"),
		sel("", "2001:db8:1::1/128"), sel("", "::/0")}
	for _, set := range sets {
		s, err := NewSelector(set[0], set[1])
		if err != nil {
			t.Fatal(err)
		}
		sels = append(sels, s)
	}
	return sels
}

// TestUpdateMatchesReplace: a SAD changed SA by SA (Update, Add, Delete,
// which change its indexes in place of rebuilding them) finds, for every
// packet, the SA that a SAD built whole from the same SAs (Replace)
// finds: the longest prefix, then live before dying, then newest (SAs
// added at one instant: the later added), whatever order the changes
// came in. Once everything is removed, no index level is left behind.
func TestUpdateMatchesReplace(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sels := updateSelectors(t)
	epoch := time.Now()
	var probes [][]byte
	for _, dst := range []string{"10.1.2.3", "10.1.2.4", "10.1.2.5", "10.1.3.1", "10.2.0.1", "192.0.2.9", "0.0.0.0", "0.0.0.1"} {
		for _, src := range []string{"192.0.2.1", "10.9.0.1"} {
			probes = append(probes, at(ipv4Packet(8), src, dst))
		}
	}
	for _, dst := range []string{"2001:db8:1::1", "2001:db8:1::2", "2001:db8:1::100", "2001:db8:2::1", "2001:db9::1"} {
		probes = append(probes, at(ipv6Packet(8), "2001:db8:9::1", dst))
	}
	spi := uint32(0x100)
	fresh := func() *SA {
		spi++
		dir := DirOut
		if rng.IntN(4) == 0 {
			dir = DirIn
		}
		s, err := New(Config{Src: outer4a, Dst: outer4b, SPI: spi, Dir: dir, Mode: ModeTunnel, IfID: uint32(1 + rng.IntN(2)),
			Selector: sels[rng.IntN(len(sels))], AEAD: &Algorithm{Name: AlgGCM, Key: seqKey(20, 0)}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		// Few instants, so that many SAs share one; some dying.
		s.added = epoch.Add(time.Duration(rng.IntN(3)) * time.Second)
		s.softFired.Store(rng.IntN(5) == 0)
		return s
	}
	d := NewSAD(nil)
	var live []*SA // in the order added
	for step := 0; step < 300 || len(live) > 0 && step < 1000; step++ {
		var remove, add []*SA
		for range rng.IntN(3) {
			if len(live) == 0 || rng.IntN(5) >= 2 {
				continue
			}
			if s := live[rng.IntN(len(live))]; !slices.Contains(remove, s) {
				remove = append(remove, s)
			}
		}
		if step < 300 {
			for range rng.IntN(3) {
				add = append(add, fresh())
			}
		} else if len(live) > 0 && !slices.Contains(remove, live[0]) {
			remove = append(remove, live[0]) // drain
		}
		var err error
		switch {
		case len(remove) == 1 && len(add) == 0 && rng.IntN(2) == 0:
			s := remove[0]
			err = d.Delete(s.cfg.Dir, s.cfg.SPI, s.cfg.Dst)
		case len(remove) == 0 && len(add) == 1 && rng.IntN(2) == 0:
			err = d.Add(add[0])
		default:
			err = d.Update(remove, add)
		}
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		live = slices.DeleteFunc(live, func(s *SA) bool { return slices.Contains(remove, s) })
		live = append(live, add...)

		ref := NewSAD(nil)
		if err := ref.Replace(live, nil); err != nil {
			t.Fatal(err)
		}
		for ifID := uint32(1); ifID <= 2; ifID++ {
			for i, p := range probes {
				got, gc := d.LookupOut(ifID, p)
				want, wc := ref.LookupOut(ifID, p)
				if got != want || gc != wc {
					t.Fatalf("step %d, if_id %d, probe %d: LookupOut = %v, %v; Replace's SAD: %v, %v", step, ifID, i, got, gc, want, wc)
				}
			}
		}
		if got, want := len(d.States()), len(live); got != want {
			t.Fatalf("step %d: %d states, want %d", step, got, want)
		}
		for _, s := range live {
			if got := d.Lookup(s.cfg.Dir, s.cfg.SPI, s.cfg.Dst); got != s {
				t.Fatalf("step %d: Lookup(%v) = %v", step, s, got)
			}
		}
	}
	if len(live) != 0 {
		t.Fatalf("%d SAs left after the drain", len(live))
	}
	for ifID := uint32(1); ifID <= 2; ifID++ {
		f := d.table.Load().ifaceOf(ifID)
		if n := len(f.v4.levels) + len(f.v6.levels) + len(f.anyDst); n != 0 {
			t.Errorf("if_id %d: %d levels and SAs without destination left in the empty SAD's index", ifID, n)
		}
	}
}

// TestUpdateAllOrNothing: an Update refused for one of its SAs changes
// nothing, and retires none of the SAs it would have removed.
func TestUpdateAllOrNothing(t *testing.T) {
	d := NewSAD(nil)
	a, b := newOut(t, 0x100, 1, sel("", "10.1.2.3/32")), newOut(t, 0x101, 1, sel("", "10.1.2.4/32"))
	if err := d.Update(nil, []*SA{a, b}); err != nil {
		t.Fatal(err)
	}
	twin := newOut(t, 0x101, 1, sel("", "10.1.2.5/32")) // b's SPI and destination
	gone := newOut(t, 0x102, 1, Selector{})
	gone.Discard()
	stranger := newOut(t, 0x103, 1, Selector{})
	tests := []struct {
		name        string
		remove, add []*SA
		want        error
	}{
		{"a taken SPI", []*SA{a}, []*SA{newOut(t, 0x104, 1, Selector{}), twin}, ErrExists},
		{"a retired SA", []*SA{a}, []*SA{gone}, ErrRetired},
		{"an SA not in the SAD", []*SA{a, stranger}, nil, ErrNotFound},
		{"an SA removed twice", []*SA{a, a}, nil, ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := d.Update(tt.remove, tt.add); !errors.Is(err, tt.want) {
				t.Fatalf("Update: %v, want %v", err, tt.want)
			}
			if got := fmt.Sprint(d.States()); got != fmt.Sprint([]*SA{a, b}) {
				t.Errorf("States after a refused Update: %s, want %v", got, []*SA{a, b})
			}
			if a.Retired() {
				t.Error("a refused Update retired the SA it was to remove")
			}
			if got, _ := d.LookupOut(1, v4to("10.1.2.3")); got != a {
				t.Errorf("LookupOut(10.1.2.3) = %v, want %v", got, a)
			}
		})
	}
	if err := d.Update([]*SA{a}, []*SA{twin}); !errors.Is(err, ErrExists) {
		t.Errorf("replacing a by b's twin: %v, want ErrExists", err)
	}
	if err := d.Update([]*SA{b}, []*SA{twin}); err != nil {
		t.Errorf("replacing b by its twin in one Update: %v", err)
	}
	if !b.Retired() {
		t.Error("the SA Update removed is not retired")
	}
	if got, _ := d.LookupOut(1, v4to("10.1.2.5")); got != twin {
		t.Errorf("LookupOut(10.1.2.5) = %v, want %v", got, twin)
	}
}
