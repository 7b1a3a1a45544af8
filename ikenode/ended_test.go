package ikenode

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/ike/keys"
	"github.com/ipsecd/ipsecd/ike/proposal"
)

// TestDeleteRetransmittedByDaemon: an IKE SA we delete while the peer
// does not answer has its delete retransmitted on the engine's schedule
// (RFC 7296 §2.4; it went once, never again), its children gone at
// once, and is forgotten when the tries run out, not before and not
// never.
func TestDeleteRetransmittedByDaemon(t *testing.T) {
	a, b := pairUp(t, sideOpts{start: "start", retransmit: 300 * time.Millisecond}, sideOpts{})
	a.net.waitFor(t, "the child", func() bool { return matched(a.node, b.node, 1) && established(a) })
	b.m.Close() // B hears and says nothing from now on
	if err := a.m.Terminate(Target{IKE: "peer"}); err != nil {
		t.Fatal(err)
	}
	start := a.net.clock.Now()
	a.net.waitFor(t, "A's children removed", func() bool { in, out := a.node.snapshot(); return len(in) == 0 && len(out) == 0 })
	if l := list(t, a); len(l) != 1 || l[0].State != "DELETING" {
		t.Fatalf("A lists %+v while its delete is unanswered, want one SA DELETING", l)
	}
	a.net.waitFor(t, "A to forget the SA", func() bool { return len(list(t, a)) == 0 })
	took := a.net.since(start)
	// Two tries of 300 ms each, then 300 ms for the last, then the grace.
	if got := a.m.Counters().Retransmits; got != 2 {
		t.Errorf("the delete was retransmitted %d times, want 2 (the tries)", got)
	}
	if took < 900*time.Millisecond {
		t.Errorf("forgotten after %v, before its retransmissions were over", took)
	}
	if !strings.Contains(a.log.String(), "the delete was not answered") {
		t.Errorf("the unanswered delete is not logged:\n%s", a.log.String())
	}
}

// TestFailedInstallWipesChild: a child the node refuses, or whose suite
// the SAD cannot take, has its keys zeroed all the same (they were left
// in the Child).
func TestFailedInstallWipesChild(t *testing.T) {
	cfg := parseSide(t, "127.0.0.1", "127.0.0.2", "a.test", "b.test", "10.1.0", "10.2.0", sideOpts{})
	f := newFakeNode(0)
	m, err := New(Config{IKE: &cfg.IKEConfig, Node: f, RawESP: true, Listen: []netip.Addr{netip.MustParseAddr("127.0.0.1")}, Transport: newMemNet()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	now := time.Now()
	c := m.conns["peer"]
	local, remote := netip.MustParseAddrPort("127.0.0.1:500"), netip.MustParseAddrPort("127.0.0.2:500")
	newX := func() *ikeSA {
		s, _, err := ike.Initiate(c.ec, local, remote, now)
		if err != nil {
			t.Fatal(err)
		}
		return m.add(s, c, now)
	}
	child := func(suite proposal.Suite, in, out uint32) *ike.Child {
		key := func(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }
		return &ike.Child{Suite: suite, InSPI: in, OutSPI: out, Local: local, Remote: remote,
			In: keys.ESPKeys{Enc: key(1, 20), Integ: key(2, 32)}, Out: keys.ESPKeys{Enc: key(3, 20), Integ: key(4, 32)}}
	}
	gcm, _ := proposal.Lookup("aes128gcm16")
	cbc, _ := proposal.Lookup("aes128")
	sha384, _ := proposal.Lookup("sha384")
	m.childUp(newX(), child(proposal.Suite{Encr: gcm}, 0x100, 0x200), false, now)
	for _, tt := range []struct {
		name  string
		child *ike.Child
	}{
		{"the node refuses it (its SPIs are taken)", child(proposal.Suite{Encr: gcm}, 0x100, 0x200)},
		{"the SAD cannot take its suite", child(proposal.Suite{Encr: cbc, Integ: sha384}, 0x101, 0x201)},
	} {
		ch := tt.child
		held := [][]byte{ch.In.Enc, ch.In.Integ, ch.Out.Enc, ch.Out.Integ}
		m.childUp(newX(), ch, false, now)
		if m.children[ch] != nil {
			t.Fatalf("%s: installed", tt.name)
		}
		for _, b := range held {
			if !bytes.Equal(b, make([]byte, len(b))) {
				t.Errorf("%s: key not wiped: %x", tt.name, b)
			}
		}
	}
}

// TestForgottenSAsWiped: an SA the IKE daemon ends without the engine
// ending it (a half-open SA of a connection a reload removed, every SA
// at shutdown) is forgotten once its grace is over, and its keys are
// zeroed then; they were left as they were.
func TestForgottenSAsWiped(t *testing.T) {
	cfg := parseSide(t, "127.0.0.1", "127.0.0.2", "a.test", "b.test", "10.1.0", "10.2.0", sideOpts{})
	m, err := New(Config{IKE: &cfg.IKEConfig, Node: newFakeNode(0), RawESP: true, Listen: []netip.Addr{netip.MustParseAddr("127.0.0.1")}, Transport: newMemNet()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := m.conns["peer"]
	local, remote := netip.MustParseAddrPort("127.0.0.1:500"), netip.MustParseAddrPort("127.0.0.2:500")
	now := time.Now()
	// A half-open responder SA: IKE_SA_INIT answered, keys derived.
	halfOpen := func() (*ikeSA, [][]byte) {
		_, req, err := ike.Initiate(c.ec, remote, local, now)
		if err != nil {
			t.Fatal(err)
		}
		s, _, err := ike.Respond(c.ec, local, remote, req, now)
		if err != nil {
			t.Fatal(err)
		}
		k := s.Keys()
		return m.add(s, c, now), [][]byte{k.D, k.EI, k.ER, k.PI, k.PR}
	}
	wiped := func(keys [][]byte) bool {
		for _, b := range keys {
			if !bytes.Equal(b, make([]byte, len(b))) {
				return false
			}
		}
		return true
	}

	x, keys := halfOpen()
	m.down(x, now) // as Reload does for a connection it removes
	m.tick(now.Add(endedGrace + time.Second))
	if len(m.sas) != 0 {
		t.Fatalf("%d SAs kept after the grace, want the ended one forgotten", len(m.sas))
	}
	if !wiped(keys) {
		t.Error("the keys of a forgotten half-open SA are not wiped")
	}

	_, keys = halfOpen()
	m.shutdown()
	if !wiped(keys) {
		t.Error("the keys of a half-open SA at shutdown are not wiped")
	}
}

// TestDeleteWhileBusyQueued: a delete asked while an exchange of ours is
// outstanding (one at a time, RFC 7296 §2.3) follows that exchange. It
// was refused ("a request is outstanding"), logged, and forgotten: the
// IKE SA and its child stayed up on both sides, though terminate had
// said nothing was wrong.
func TestDeleteWhileBusyQueued(t *testing.T) {
	a, b := pairUp(t, sideOpts{start: "start"}, sideOpts{})
	a.net.waitFor(t, "the child", func() bool { return matched(a.node, b.node, 1) && established(a) && established(b) })
	var busy bool
	if err := a.m.do(func() {
		now := a.m.clock.Now()
		x := a.m.liveSA(a.m.conns["peer"])
		out, err := x.sa.Ping(now) // outstanding until B answers
		if err != nil {
			t.Error(err)
			return
		}
		a.m.request(x, out)
		busy = x.sa.Busy()
		a.m.deleteSA(x, now)
	}); err != nil {
		t.Fatal(err)
	}
	if !busy {
		t.Fatal("the liveness check was not outstanding when the delete was asked")
	}
	a.net.waitFor(t, "both sides empty", func() bool {
		ain, _ := a.node.snapshot()
		bin, _ := b.node.snapshot()
		la, _ := a.m.List()
		lb, _ := b.m.List()
		return len(ain) == 0 && len(bin) == 0 && len(la) == 0 && len(lb) == 0
	})
}

// TestTerminateConnecting: terminate ends an IKE SA still on its way up
// (its peer silent): it is forgotten after the grace and retransmits no
// more. Delete refused it ("not established") and it went on
// retransmitting IKE_SA_INIT until its tries ran out.
func TestTerminateConnecting(t *testing.T) {
	n := newTestNet()
	b := startEndpoint(t, n, parseSide(t, "127.0.0.2", "127.0.0.1", "b.test", "a.test", "10.2.0", "10.1.0", sideOpts{}), "127.0.0.2", 0, 0x2000)
	port := b.m.Port()
	b.m.Close() // silent
	a := startEndpoint(t, n, parseSide(t, "127.0.0.1", "127.0.0.2", "a.test", "b.test", "10.1.0", "10.2.0",
		sideOpts{start: "start", retransmit: 300 * time.Millisecond}), "127.0.0.1", port, 0x1000)
	a.net.waitFor(t, "A connecting", func() bool { l := list(t, a); return len(l) == 1 && l[0].State == "CONNECTING" })
	if err := a.m.Terminate(Target{IKE: "peer"}); err != nil {
		t.Fatal(err)
	}
	sent := a.m.Counters().Sent
	a.net.waitFor(t, "A to forget it", func() bool { return len(list(t, a)) == 0 })
	a.net.advance(t, 700*time.Millisecond) // past two retransmission timeouts
	if more := a.m.Counters().Sent - sent; more != 0 {
		t.Errorf("%d datagrams sent after terminate, want none", more)
	}
}
