package sa

import (
	"net/netip"
	"slices"
	"testing"
	"time"
)

// TestPickOrder checks which of several outbound SAs with the same
// selector LookupOut uses, as Linux's xfrm_state_look_at chooses: never a
// hard-expired SA, a live one before a dying (soft-expired) one, and the
// newest add time among equals, whatever the order the SAs were added in.
func TestPickOrder(t *testing.T) {
	base := time.Now()
	type saSpec struct {
		spi   uint32
		age   time.Duration // added this long before base
		state string        // "live", "dying" or "expired"
	}
	tests := []struct {
		name string
		sas  []saSpec // in the order they are added to the SAD
		want uint32   // 0: no SA (XfrmOutNoStates)
	}{
		{"newest live wins", []saSpec{{0x100, 2 * time.Minute, "live"}, {0x101, time.Minute, "live"}}, 0x101},
		{"newest by add time, not by add order", []saSpec{{0x101, time.Minute, "live"}, {0x100, 2 * time.Minute, "live"}}, 0x101},
		{"fresh beats a newer dying one", []saSpec{{0x100, 2 * time.Minute, "live"}, {0x101, time.Minute, "dying"}}, 0x100},
		{"fresh beats an older dying one", []saSpec{{0x100, 2 * time.Minute, "dying"}, {0x101, time.Minute, "live"}}, 0x101},
		{"dying beats a newer expired one", []saSpec{{0x100, 2 * time.Minute, "dying"}, {0x101, time.Minute, "expired"}}, 0x100},
		{"newest dying wins among dying", []saSpec{{0x101, time.Minute, "dying"}, {0x100, 2 * time.Minute, "dying"}, {0x102, 3 * time.Minute, "dying"}}, 0x101},
		{"fresh beats dying beats expired", []saSpec{{0x100, time.Minute, "expired"}, {0x101, 2 * time.Minute, "dying"}, {0x102, 3 * time.Minute, "live"}}, 0x102},
		{"only expired: none", []saSpec{{0x100, time.Minute, "expired"}, {0x101, 2 * time.Minute, "expired"}}, 0},
	}
	for _, tt := range tests {
		for _, selector := range []Selector{{}, sel("", "203.0.113.0/24")} {
			name := tt.name + "/any dst"
			if selector.Dst.IsValid() {
				name = tt.name + "/dst prefix"
			}
			t.Run(name, func(t *testing.T) {
				d := NewSAD(nil)
				for _, sp := range tt.sas {
					s := newOut(t, sp.spi, 1, selector)
					s.added = base.Add(-sp.age)
					switch sp.state {
					case "dying":
						s.softExpire(ReasonPackets)
					case "expired":
						s.softExpire(ReasonPackets)
						s.hardExpire(ReasonPackets)
					}
					if err := d.Add(s); err != nil {
						t.Fatal(err)
					}
				}
				got, c := d.LookupOut(1, v4to("203.0.113.7"))
				var gotSPI uint32
				if got != nil {
					gotSPI = got.SPI()
				}
				if gotSPI != tt.want {
					t.Errorf("LookupOut picked SA 0x%x (%v), want 0x%x", gotSPI, c, tt.want)
				}
				if tt.want == 0 && c != XfrmOutNoStates {
					t.Errorf("LookupOut counted %v, want XfrmOutNoStates", c)
				}
			})
		}
	}

	// A dying SA keeps its place while nothing better exists, and a fresh
	// SA added later takes over from it at once.
	d := NewSAD(nil)
	old := newOut(t, 0x100, 1, Selector{})
	if err := d.Add(old); err != nil {
		t.Fatal(err)
	}
	old.softExpire(ReasonBytes)
	if got, _ := d.LookupOut(1, v4to("203.0.113.7")); got != old {
		t.Fatalf("the only SA, dying: LookupOut = %v, want %v", got, old)
	}
	fresh := newOut(t, 0x101, 1, Selector{})
	if err := d.Add(fresh); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.LookupOut(1, v4to("203.0.113.7")); got != fresh {
		t.Errorf("after adding a fresh SA: LookupOut = %v, want %v", got, fresh)
	}
}

// TestHardExpiryLikeLinux: the packet that finds a hard limit reached is
// the one refused and counted as expired, in both directions; an SA that
// has carried exactly its limit is still valid, as Linux's
// xfrm_state_check_expire has it.
func TestHardExpiryLikeLinux(t *testing.T) {
	for _, dir := range []Dir{DirOut, DirIn} {
		t.Run(dir.String(), func(t *testing.T) {
			out, in := pair(t, ModeTunnel, false, false, 64, func(c *Config) {
				suites[0].set(c)
				c.Lifetime = Lifetime{HardPackets: 4}
			})
			if dir == DirIn {
				out.SetLifetime(Lifetime{})
			}
			s := map[Dir]*SA{DirOut: out, DirIn: in}[dir]
			expired := map[Dir]Counter{DirOut: XfrmOutStateExpired, DirIn: XfrmInStateExpired}[dir]
			send := func() Counter {
				ps := []Packet{mkPacket(ipv4Packet(20))}
				out.SealBatch(ps)
				if dir == DirIn && ps[0].Drop == CounterNone {
					ps[0] = reseat(ps[0])
					in.OpenBatch(ps)
				}
				return ps[0].Drop
			}
			for i := 1; i <= 4; i++ {
				if c := send(); c != CounterNone {
					t.Fatalf("packet %d of 4: dropped as %v", i, c)
				}
			}
			if st := s.Stats(); st.HardExpired || st.Packets != 4 {
				t.Fatalf("after exactly 4 packets: %+v, want 4 packets and not expired", st)
			}
			if c := send(); c != expired {
				t.Fatalf("packet 5: %v, want %v", c, expired)
			}
			st := s.Stats()
			if !st.HardExpired || st.Packets != 4 {
				t.Errorf("after packet 5: %+v, want hard expired with 4 packets (the refused one not counted)", st)
			}
			if dir == DirIn && in.window.Top() != 4 {
				t.Errorf("window top %d, want 4: a refused packet must not advance the window", in.window.Top())
			}
			if got := s.counters.Get(expired); got != 1 {
				t.Errorf("%v = %d, want 1", expired, got)
			}
		})
	}
}

// TestRemoveExpired: RemoveExpired takes exactly the hard-expired SAs out
// of the SAD, in both directions, retires them (keys zeroed, no more
// events) and leaves the others as they were.
func TestRemoveExpired(t *testing.T) {
	var events []Event
	d := NewSAD(nil)
	d.SetEventHandler(func(e Event) { events = append(events, e) })
	out, in := pair(t, ModeTunnel, false, false, 64, func(c *Config) {
		suites[5].set(c) // AES-CBC with HMAC: an HMAC key and a cipher key to zero
		c.Lifetime = Lifetime{SoftPackets: 1, HardPackets: 2}
	})
	keep := newOut(t, 0x2000, 1, sel("", "203.0.113.0/24"))
	keepIn, err := New(Config{Src: outer4b, Dst: outer4a, SPI: 0x2001, Dir: DirIn, Mode: ModeTunnel, IfID: 1,
		AEAD: &Algorithm{Name: AlgGCM, Key: seqKey(20, 40)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Replace([]*SA{out, in, keep, keepIn}, nil); err != nil {
		t.Fatal(err)
	}
	if got := d.RemoveExpired(); got != nil {
		t.Fatalf("RemoveExpired with nothing expired = %v, want nil", got)
	}
	// Packets 1 and 2 pass; 3 finds the hard limit: the out SA expires.
	// The in SA opens 1 and 2, then expires on a third packet sealed by
	// an SA of the same keys without limits.
	for i := 0; i < 3; i++ {
		ps := []Packet{mkPacket(ipv4Packet(30))}
		out.SealBatch(ps)
		if i < 2 {
			in.OpenBatch([]Packet{reseat(ps[0])})
		}
	}
	twin, _ := pair(t, ModeTunnel, false, false, 64, suites[5].set)
	twin.seq.Store(2)
	ps := []Packet{reseat(sealOne(t, twin, ipv4Packet(30)))}
	in.OpenBatch(ps)
	if ps[0].Drop != XfrmInStateExpired {
		t.Fatalf("third packet into the in SA: %v, want XfrmInStateExpired", ps[0].Drop)
	}
	nEvents := len(events)
	if nEvents != 4 {
		t.Errorf("%d events before removal, want 4 (soft and hard of each SA): %+v", nEvents, events)
	}

	removed := d.RemoveExpired()
	if len(removed) != 2 || !slices.Contains(removed, out) || !slices.Contains(removed, in) {
		t.Fatalf("RemoveExpired = %v, want the out and in SA 0x1001", removed)
	}
	if got := d.States(); !slices.Equal(got, []*SA{keepIn, keep}) {
		t.Errorf("States after RemoveExpired = %v, want only %v and %v", got, keepIn, keep)
	}
	if d.LookupIn(0x1001, netip.Addr{}) != nil || d.LookupIn(0x2001, netip.Addr{}) != keepIn {
		t.Errorf("LookupIn after RemoveExpired: the expired SA is still found, or the other one is not")
	}
	if got, _ := d.LookupOut(1, v4to("203.0.113.7")); got != keep {
		t.Errorf("LookupOut after RemoveExpired = %v, want %v", got, keep)
	}
	for _, s := range removed {
		if !s.Retired() || !s.Wiped() {
			t.Errorf("%v: retired %v, wiped %v; want both", s, s.Retired(), s.Wiped())
		}
		checkWiped(t, s)
	}
	for _, s := range []*SA{keep, keepIn} {
		if s.Retired() || s.Wiped() {
			t.Errorf("%v: retired %v, wiped %v; want neither", s, s.Retired(), s.Wiped())
		}
		if k := s.Config().AEAD.Key; len(k) != 20 || isZero(k) {
			t.Errorf("%v: key %x after another SA's removal, want it intact", s, k)
		}
	}
	// A removed SA raises nothing more, even if a batch still reaches it.
	out.hardFired.Store(false)
	out.hardExpire(ReasonAddTime)
	if len(events) != nEvents {
		t.Errorf("a removed SA raised %+v", events[nEvents:])
	}
	if got := d.RemoveExpired(); got != nil {
		t.Errorf("second RemoveExpired = %v, want nil", got)
	}
	if err := d.Add(out); err == nil {
		t.Errorf("Add of a removed SA succeeded, want ErrRetired")
	}
}
