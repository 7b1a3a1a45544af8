package ikenode

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/config"
)

// eventRecorder keeps what an IKE daemon's Config.OnEvent was told, in
// order.
type eventRecorder struct {
	mu sync.Mutex
	ev []Event
}

func (r *eventRecorder) record(ev Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ev = append(r.ev, ev)
}

// take returns the events since the last take.
func (r *eventRecorder) take() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.ev
	r.ev = nil
	return out
}

// brief writes events as type[/child][:reason], for comparing
// sequences.
func brief(evs []Event) []string {
	var out []string
	for _, ev := range evs {
		s := ev.Type
		if ev.Child != "" {
			s += "/" + ev.Child
		}
		if ev.Reason != "" {
			s += ":" + ev.Reason
		}
		out = append(out, s)
	}
	return out
}

func wantEvents(t *testing.T, who string, got []Event, want ...string) {
	t.Helper()
	if b := brief(got); !slices.Equal(b, want) {
		t.Errorf("%s's events %q, want %q", who, b, want)
	}
}

// TestEvents: what ipsecd monitor shows of IKE, in order, on both
// sides: the IKE SA and its child up; a child rekey from each side
// (child_rekeyed with the old and new SPIs, no child_down); an IKE rekey
// (ike_rekeyed with the old and new SPIs, nothing of the children); a
// child terminated and brought back; a terminate (by us on one side, by
// the peer on the other), the child first.
func TestEvents(t *testing.T) {
	a, b := pairUp(t, sideOpts{start: "start"}, sideOpts{})
	a.net.waitFor(t, "the first child", func() bool { return matched(a.node, b.node, 1) && established(a) && established(b) })
	ea, eb := a.ev.take(), b.ev.take()
	wantEvents(t, "A", ea, "ike_up", "child_up/net")
	wantEvents(t, "B", eb, "ike_up", "child_up/net")
	la, lb := list(t, a)[0], list(t, b)[0]
	if len(ea) == 2 {
		up, ch := ea[0], ea[1]
		if up.Connection != "peer" || up.LocalID != "a.test" || up.PeerID != "b.test" || up.SPIInitiator != la.SPIInitiator ||
			up.SPIResponder != la.SPIResponder || up.Local != la.Local || up.Remote != la.Remote {
			t.Errorf("A's ike_up %+v; ike list says %+v", up, la)
		}
		if ch.SPIIn != la.Children[0].SPIIn || ch.SPIOut != la.Children[0].SPIOut || ch.SPIInitiator != la.SPIInitiator || ch.PeerID != "b.test" {
			t.Errorf("A's child_up %+v; ike list says %+v", ch, la.Children[0])
		}
	}
	if len(eb) == 2 && (eb[1].SPIIn != lb.Children[0].SPIIn || eb[0].PeerID != "a.test") {
		t.Errorf("B's events %+v; ike list says %+v", eb, lb)
	}

	for _, step := range []struct {
		e      *endpoint
		target Target
	}{{a, Target{Child: "net"}}, {b, Target{Child: "net"}}, {b, Target{IKE: "peer"}}} {
		other := b
		if step.e == b {
			other = a
		}
		before, obefore := list(t, step.e)[0], list(t, other)[0]
		if err := step.e.m.Rekey(step.target); err != nil {
			t.Fatal(err)
		}
		step.e.net.waitFor(t, "the rekey", func() bool {
			l, _ := step.e.m.List()
			if len(l) != 1 || len(l[0].Children) != 1 || l[0].State != "ESTABLISHED" {
				return false
			}
			if step.target.IKE != "" {
				return l[0].SPIInitiator != before.SPIInitiator
			}
			return l[0].Children[0].SPIIn != before.Children[0].SPIIn && matched(a.node, b.node, 1)
		})
		step.e.net.advance(t, 3*time.Second) // the old IKE SA's grace ends: nothing more
		after, oafter := list(t, step.e)[0], list(t, other)[0]
		mine, theirs := step.e.ev.take(), other.ev.take()
		if step.target.IKE != "" {
			wantEvents(t, "the rekeying side", mine, "ike_rekeyed")
			wantEvents(t, "the other side", theirs, "ike_rekeyed")
			for _, ev := range slices.Concat(mine, theirs) {
				if ev.OldSPIInitiator != before.SPIInitiator || ev.OldSPIResponder != before.SPIResponder ||
					ev.SPIInitiator != after.SPIInitiator || ev.SPIResponder != after.SPIResponder {
					t.Errorf("ike_rekeyed %+v: want old %s_%s, new %s_%s", ev, before.SPIInitiator, before.SPIResponder, after.SPIInitiator, after.SPIResponder)
				}
			}
			continue
		}
		wantEvents(t, "the rekeying side", mine, "child_rekeyed/net:rekeyed by us")
		wantEvents(t, "the other side", theirs, "child_rekeyed/net:rekeyed by peer")
		for _, c := range []struct {
			evs           []Event
			before, after string // SPIIn
			oldOut        string
		}{{mine, before.Children[0].SPIIn, after.Children[0].SPIIn, before.Children[0].SPIOut},
			{theirs, obefore.Children[0].SPIIn, oafter.Children[0].SPIIn, obefore.Children[0].SPIOut}} {
			if len(c.evs) == 1 && (c.evs[0].OldSPIIn != c.before || c.evs[0].SPIIn != c.after || c.evs[0].OldSPIOut != c.oldOut) {
				t.Errorf("child_rekeyed %+v: want in %s (was %s), old out %s", c.evs[0], c.after, c.before, c.oldOut)
			}
		}
	}

	// One child terminated, and brought back, under the same IKE SA.
	if err := b.m.Terminate(Target{Child: "net"}); err != nil {
		t.Fatal(err)
	}
	a.net.waitFor(t, "the child gone", func() bool { return matched(a.node, b.node, 0) })
	wantEvents(t, "B", b.ev.take(), "child_down/net:terminated")
	wantEvents(t, "A", a.ev.take(), "child_down/net:deleted by peer")
	if err := a.m.Initiate(Target{Child: "net"}); err != nil {
		t.Fatal(err)
	}
	a.net.waitFor(t, "the child back", func() bool { return matched(a.node, b.node, 1) })
	wantEvents(t, "A", a.ev.take(), "child_up/net")
	wantEvents(t, "B", b.ev.take(), "child_up/net")

	if err := a.m.Terminate(Target{IKE: "peer"}); err != nil {
		t.Fatal(err)
	}
	a.net.waitFor(t, "both sides empty", func() bool {
		la, _ := a.m.List()
		lb, _ := b.m.List()
		return len(la) == 0 && len(lb) == 0
	})
	wantEvents(t, "A", a.ev.take(), "child_down/net:terminated", "ike_down:terminated")
	wantEvents(t, "B", b.ev.take(), "child_down/net:deleted by peer", "ike_down:deleted by peer")
}

// TestEventsFailures: the failures an operator watches for: a wrong PSK
// (ike_failed, authentication failed, on both sides), a peer that stops
// answering (ike_down, timeout), a child whose selectors the peer
// refuses (child_failed, TS unacceptable, the IKE SA up), an IKE
// proposal the responder refuses (ike_failed, no proposal chosen, on
// both sides), and a reload that removes the connection.
func TestEventsFailures(t *testing.T) {
	t.Run("auth", func(t *testing.T) {
		n := newTestNet()
		cfgB := parseSide(t, "127.0.0.2", "127.0.0.1", "b.test", "a.test", "10.2.0", "10.1.0", sideOpts{})
		cfgB.Connections[0].PSK = config.Key("not the same secret at all, no")
		b := startEndpoint(t, n, cfgB, "127.0.0.2", 0, 0x2000)
		a := startEndpoint(t, n, parseSide(t, "127.0.0.1", "127.0.0.2", "a.test", "b.test", "10.1.0", "10.2.0", sideOpts{start: "start"}), "127.0.0.1", b.m.Port(), 0x1000)
		n.waitFor(t, "the failure on both sides", func() bool { return a.m.Counters().AuthFailures > 0 && b.m.Counters().AuthFailures > 0 })
		n.advance(t, time.Second) // not the retry (5 s)
		ea := a.ev.take()
		wantEvents(t, "A", ea, "ike_failed:authentication failed")
		wantEvents(t, "B", b.ev.take(), "ike_failed:authentication failed")
		if len(ea) == 1 && (ea[0].Error == "" || ea[0].Connection != "peer" || ea[0].SPIResponder == spiHex(0)) {
			t.Errorf("A's ike_failed %+v: want the error, the connection and both SPIs", ea[0])
		}
	})
	t.Run("timeout", func(t *testing.T) {
		a, b := pairUp(t, sideOpts{start: "start", dpdDelay: "1s", retransmit: 200 * time.Millisecond}, sideOpts{})
		a.net.waitFor(t, "the first child", func() bool { return matched(a.node, b.node, 1) })
		a.ev.take()
		b.m.Close() // dead: it sends no delete
		a.net.waitFor(t, "A to clear the dead peer's SAs", func() bool { l, _ := a.m.List(); return len(l) == 0 })
		wantEvents(t, "A", a.ev.take(), "child_down/net:timeout", "ike_down:timeout")
	})
	t.Run("ts", func(t *testing.T) {
		n := newTestNet()
		// B's child is for 10.3.0.0/24, not the 10.2.0.0/24 A asks for.
		b := startEndpoint(t, n, parseSide(t, "127.0.0.2", "127.0.0.1", "b.test", "a.test", "10.3.0", "10.1.0", sideOpts{}), "127.0.0.2", 0, 0x2000)
		a := startEndpoint(t, n, parseSide(t, "127.0.0.1", "127.0.0.2", "a.test", "b.test", "10.1.0", "10.2.0", sideOpts{start: "start"}), "127.0.0.1", b.m.Port(), 0x1000)
		n.waitFor(t, "A's IKE SA up", func() bool { l, _ := a.m.List(); return len(l) == 1 && l[0].State == "ESTABLISHED" })
		n.advance(t, time.Second)
		wantEvents(t, "A", a.ev.take(), "ike_up", "child_failed/net:TS unacceptable")
		wantEvents(t, "B", b.ev.take(), "ike_up", "child_failed:TS unacceptable")
		// The SPI A's IKE_AUTH offered is given back at once: the
		// engine says it went unused (before, a ledger held it 10 min).
		if r := a.node.reserved(); len(r) != 0 {
			t.Errorf("A still reserves SPIs %x for the refused child", r)
		}
	})
	t.Run("proposal", func(t *testing.T) {
		n := newTestNet()
		// B's IKE proposal is not A's.
		other := strings.Replace(sideYAML, "aes128gcm16-prfsha256-x25519", "aes256-sha256-x25519", 1)
		y := fmt.Sprintf(other, "127.0.0.2", "127.0.0.1", "b.test", "a.test", "10.2.0", "10.1.0", "none", "4h", "0s", "clear", "1h")
		cfgB, err := config.Parse("b.yaml", []byte(y))
		if err != nil {
			t.Fatal(err)
		}
		cfgB.IKE.Port = 0
		b := startEndpoint(t, n, cfgB, "127.0.0.2", 0, 0x2000)
		a := startEndpoint(t, n, parseSide(t, "127.0.0.1", "127.0.0.2", "a.test", "b.test", "10.1.0", "10.2.0", sideOpts{start: "start"}), "127.0.0.1", b.m.Port(), 0x1000)
		n.waitFor(t, "A's failure", func() bool { return strings.Contains(a.log.String(), "retrying") })
		wantEvents(t, "A", a.ev.take(), "ike_failed:no proposal chosen")
		wantEvents(t, "B", b.ev.take(), "ike_failed:no proposal chosen")
	})
	t.Run("initial contact", func(t *testing.T) {
		a, b := pairUp(t, sideOpts{start: "start"}, sideOpts{})
		a.net.waitFor(t, "the first child", func() bool { return matched(a.node, b.node, 1) })
		b.ev.take()
		a.m.Close() // A dies without a delete, and comes back
		cfg := parseSide(t, "127.0.0.1", "127.0.0.2", "a.test", "b.test", "10.1.0", "10.2.0", sideOpts{start: "start"})
		startEndpoint(t, b.net, cfg, "127.0.0.1", b.m.Port(), 0x5000)
		b.net.waitFor(t, "the new pair in B", func() bool { _, out := b.node.snapshot(); return len(out) == 1 && out[0x5001].SPI != 0 })
		wantEvents(t, "B", b.ev.take(), "ike_up", "child_down/net:initial contact", "ike_down:initial contact", "child_up/net")
	})
	t.Run("reload", func(t *testing.T) {
		a, b := pairUp(t, sideOpts{start: "start"}, sideOpts{})
		a.net.waitFor(t, "the first child", func() bool { return matched(a.node, b.node, 1) })
		a.ev.take()
		empty := parseSide(t, "127.0.0.1", "127.0.0.2", "a.test", "b.test", "10.1.0", "10.2.0", sideOpts{})
		empty.Connections = nil
		if _, err := a.m.Reload(&empty.IKEConfig); err != nil {
			t.Fatal(err)
		}
		a.net.waitFor(t, "A empty", func() bool { l, _ := a.m.List(); return len(l) == 0 })
		wantEvents(t, "A", a.ev.take(), "child_down/net:reload", "ike_down:reload")
	})
}
