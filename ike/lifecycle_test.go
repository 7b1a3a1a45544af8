package ike

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"
)

// The engine alone says what the daemon installs and when
// (make-before-break): these tests read only its events, over the
// event sequences of a child's rekey from either side, both at once in
// each nonce order, a rekey crossing a delete, an IKE rekey moving the
// children, and lost messages.

// lifecycle is A (us) and B (the peer) with one child, and what each
// reported, one line per event: "up A's" (a child A's request made;
// "in" when only its inbound SA goes in, "redundant"), "out B's" (its
// outbound SA goes in now), "down old", "moved old", "spi" (an SPI went
// unused), "ike rekeyed".
type lifecycle struct {
	t    *testing.T
	sa   [2]*SA
	old  [2]*Child
	seen [2][]string
}

func newLifecycle(t *testing.T) *lifecycle {
	t.Helper()
	ci, cr := pairConfigs(t, []string{"aes256-sha256-x25519"}, []string{"aes128gcm16-x25519"})
	a, b := establishedSides(t, ci, cr, false)
	return &lifecycle{t: t, sa: [2]*SA{a, b}, old: [2]*Child{a.Children()[0], b.Children()[0]}}
}

// label names c as side sees it: the first child, or a child made by A's
// or B's request (its initiator's keys are the ones A's side sends with,
// B's side receives with).
func (l *lifecycle) label(side int, c *Child) string {
	if c == l.old[side] {
		return "old"
	}
	keys := c.Out.Enc
	if side == 1 {
		keys = c.In.Enc
	}
	if bytes.Equal(keys, c.InitiatorKeys.Enc) {
		return "A's"
	}
	return "B's"
}

// collect records the events of side's SA s.
func (l *lifecycle) collect(side int, s *SA) {
	for _, e := range s.TakeEvents() {
		var line string
		switch e.Kind {
		case EventChildUp:
			line = "up " + l.label(side, e.Child)
			if e.InboundOnly {
				line += " in"
			}
			if e.Child.Redundant {
				line += " redundant"
			}
		case EventChildOutbound:
			line = "out " + l.label(side, e.Child)
		case EventChildDown:
			line = "down " + l.label(side, e.Child)
		case EventChildMoved:
			line = "moved " + l.label(side, e.Child)
		case EventSPIUnused:
			line = "spi"
		case EventIKERekeyed:
			line = "ike rekeyed"
			l.collect(side, e.SA)
		default:
			continue
		}
		l.seen[side] = append(l.seen[side], line)
	}
}

// deliver hands msg from side from to the other side's SA and returns
// the answer (nil for a response, or none).
func (l *lifecycle) deliver(from int, msg []byte) []byte {
	l.t.Helper()
	if msg == nil {
		l.t.Fatal("nothing to deliver")
	}
	to := 1 - from
	out, err := l.sa[to].Handle(msg, t0)
	if err != nil && !errors.Is(err, ErrBusy) && !errors.Is(err, ErrChildFailed) {
		l.t.Fatalf("side %d: %v", to, err)
	}
	l.collect(0, l.sa[0])
	l.collect(1, l.sa[1])
	return out
}

// exchange runs side from's request to the end and returns what from
// sends next (the delete after a rekey).
func (l *lifecycle) exchange(from int, req []byte) []byte {
	l.t.Helper()
	return l.deliver(1-from, l.deliver(from, req))
}

// rekey starts side's rekey of the old child.
func (l *lifecycle) rekey(side int) []byte {
	l.t.Helper()
	req, err := l.sa[side].RekeyChild(l.old[side], t0)
	if err != nil || req == nil {
		l.t.Fatalf("rekey: %v", err)
	}
	return req
}

// collide has both sides rekey the old child at once (§2.8.1), each
// taking the other's request, with A's rekey winning or losing as asked
// (by the nonces, which are random: it starts over until they fall so,
// at most 64 times); then each side's answer arrives, and A's delete
// (of the old pair when it won, of its redundant child when it lost)
// completes before B's.
func collide(t *testing.T, aWins bool) *lifecycle {
	for range 64 {
		l := newLifecycle(t)
		reqA, reqB := l.rekey(0), l.rekey(1)
		respA, respB := l.deliver(0, reqA), l.deliver(1, reqB)
		xa, xb := l.sa[0].active.(*childRekey), l.sa[1].active.(*childRekey)
		if lostTo(xa.crossing, xa.ni, xb.crossing.nr) == aWins {
			continue
		}
		delA, delB := l.deliver(1, respA), l.deliver(0, respB)
		l.exchange(0, delA)
		l.exchange(1, delB)
		return l
	}
	t.Fatal("64 collisions, none of the nonce order asked for")
	return nil
}

// TestMakeBeforeBreak: what each side is told to install, and when, over
// the event sequences of a child's life. The side that rekeys installs
// the new pair whole once the answer proves the peer has it; the side
// that answers installs the inbound SA only, and the outbound SA when
// the peer deletes the old pair. After simultaneous rekeys the loser's
// child is redundant on both sides: its outbound SA never goes in, its
// maker deletes it, and only the winner's replaces the old pair.
func TestMakeBeforeBreak(t *testing.T) {
	for _, tt := range []struct {
		name string
		run  func(t *testing.T) *lifecycle
		a, b []string
	}{{
		name: "our rekey",
		run: func(t *testing.T) *lifecycle {
			l := newLifecycle(t)
			l.exchange(0, l.exchange(0, l.rekey(0)))
			return l
		},
		a: []string{"up A's", "down old"},
		b: []string{"up A's in", "out A's", "down old"},
	}, {
		name: "peer's rekey",
		run: func(t *testing.T) *lifecycle {
			l := newLifecycle(t)
			l.exchange(1, l.exchange(1, l.rekey(1)))
			return l
		},
		a: []string{"up B's in", "out B's", "down old"},
		b: []string{"up B's", "down old"},
	}, {
		name: "both at once, ours wins",
		run:  func(t *testing.T) *lifecycle { return collide(t, true) },
		a:    []string{"up B's in", "up A's", "down old", "down B's"},
		b:    []string{"up A's in", "up B's in redundant", "out A's", "down old", "down B's"},
	}, {
		name: "both at once, the peer's wins",
		run:  func(t *testing.T) *lifecycle { return collide(t, false) },
		a:    []string{"up B's in", "up A's in redundant", "down A's", "out B's", "down old"},
		b:    []string{"up A's in", "up B's", "down A's", "down old"},
	}, {
		name: "our rekey crosses the peer's delete",
		run: func(t *testing.T) *lifecycle {
			l := newLifecycle(t)
			reqA := l.rekey(0)
			del, err := l.sa[1].DeleteChild(l.old[1], t0)
			if err != nil {
				t.Fatal(err)
			}
			refused := l.deliver(0, reqA) // TEMPORARY_FAILURE (§2.25.1)
			l.exchange(1, del)
			if l.deliver(1, refused) != nil {
				t.Fatal("a refused rekey sent something")
			}
			return l
		},
		a: []string{"down old", "spi"},
		b: []string{"down old"},
	}, {
		name: "the peer's rekey crosses our delete",
		run: func(t *testing.T) *lifecycle {
			l := newLifecycle(t)
			del, err := l.sa[0].DeleteChild(l.old[0], t0)
			if err != nil {
				t.Fatal(err)
			}
			refused := l.deliver(1, l.rekey(1))
			l.exchange(0, del)
			l.deliver(0, refused)
			return l
		},
		a: []string{"down old"},
		b: []string{"down old", "spi"},
	}, {
		name: "our rekey's answer lost",
		run: func(t *testing.T) *lifecycle {
			l := newLifecycle(t)
			req := l.rekey(0)
			l.deliver(0, req) // the answer goes nowhere
			again, _ := l.sa[0].Tick(t0.Add(time.Minute))
			if !bytes.Equal(again, req) {
				t.Fatal("the rekey was not retransmitted")
			}
			l.exchange(0, l.exchange(0, again))
			return l
		},
		a: []string{"up A's", "down old"},
		b: []string{"up A's in", "out A's", "down old"},
	}, {
		name: "the peer's delete of the old pair repeated",
		run: func(t *testing.T) *lifecycle {
			l := newLifecycle(t)
			del := l.exchange(1, l.rekey(1))
			l.deliver(1, del) // our answer is lost
			again, _ := l.sa[1].Tick(t0.Add(time.Minute))
			l.exchange(1, again)
			return l
		},
		a: []string{"up B's in", "out B's", "down old"},
		b: []string{"up B's", "down old"},
	}, {
		name: "IKE rekey moves the children",
		run: func(t *testing.T) *lifecycle {
			l := newLifecycle(t)
			req, err := l.sa[0].RekeyIKE(t0)
			if err != nil {
				t.Fatal(err)
			}
			l.deliver(1, l.deliver(0, req))
			return l
		},
		a: []string{"ike rekeyed", "moved old"},
		b: []string{"ike rekeyed", "moved old"},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			l := tt.run(t)
			for side, want := range [][]string{tt.a, tt.b} {
				if got := l.seen[side]; !slices.Equal(got, want) {
					t.Errorf("%c was told %q, want %q", "AB"[side], got, want)
				}
			}
		})
	}
}

// TestChildState: a child carries its own state and who made its
// replacement, as the engine moves them: our rekey (rekeying, then
// rekeyed by us, then deleted), the peer's (rekeyed by the peer, the new
// child's outbound SA waiting until the old one is deleted), a rekey the
// peer refuses (installed again, its SPI given back), and simultaneous
// rekeys (the loser's child redundant on both sides, the old one rekeyed
// by the winner).
func TestChildState(t *testing.T) {
	check := func(what string, c *Child, state ChildState, by Side) {
		t.Helper()
		if c.State() != state || c.RekeyedBy() != by {
			t.Errorf("%s: %v rekeyed by %d, want %v by %d", what, c.State(), c.RekeyedBy(), state, by)
		}
	}
	t.Run("ours", func(t *testing.T) {
		l := newLifecycle(t)
		req := l.rekey(0)
		check("A's old child, rekey sent", l.old[0], ChildRekeying, SideNone)
		del := l.exchange(0, req)
		check("A's old child, answer in", l.old[0], ChildDeleting, SideUs)
		check("B's old child, answered", l.old[1], ChildRekeyed, SidePeer)
		if n := l.sa[1].Children()[1]; !n.OutboundWaits() {
			t.Error("B installs the new child's outbound SA before A deleted the old one")
		}
		l.exchange(0, del)
		check("A's old child, deleted", l.old[0], ChildDeleted, SideUs)
		if n := l.sa[1].Children()[0]; n.OutboundWaits() || n.State() != ChildInstalled {
			t.Errorf("B's new child: %v, outbound waits %v; want installed whole", n.State(), n.OutboundWaits())
		}
	})
	t.Run("refused", func(t *testing.T) {
		l := newLifecycle(t)
		if _, err := l.sa[1].CreateChild("", t0); err != nil { // B's exchange under way
			t.Fatal(err)
		}
		l.exchange(0, l.rekey(0)) // answered TEMPORARY_FAILURE
		check("A's old child, rekey refused", l.old[0], ChildInstalled, SideNone)
		if !slices.Contains(l.seen[0], "spi") {
			t.Errorf("A was told %q: want its new SPI given back", l.seen[0])
		}
		if _, err := l.sa[0].RekeyChild(l.old[0], t0); err != nil {
			t.Errorf("rekey again: %v", err)
		}
	})
	for _, aWins := range []bool{true, false} {
		t.Run(map[bool]string{true: "collision won", false: "collision lost"}[aWins], func(t *testing.T) {
			l := collide(t, aWins)
			winner, loser := SideUs, SidePeer
			if !aWins {
				winner, loser = loser, winner
			}
			check("A's old child", l.old[0], ChildDeleted, winner)
			check("B's old child", l.old[1], ChildDeleted, loser)
			for side, s := range l.sa {
				if cs := s.Children(); len(cs) != 1 || cs[0].Redundant || cs[0].State() != ChildInstalled || cs[0].OutboundWaits() {
					t.Errorf("%c keeps %d children, want the winner's installed whole", "AB"[side], len(cs))
				}
			}
		})
	}
}
