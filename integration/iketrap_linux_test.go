//go:build linux

package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/control"
)

// kill ends the daemon with SIGKILL, as a crash would: no delete reaches
// the peer, which keeps its IKE SA and child.
func (d *daemon) kill(t *testing.T) {
	t.Helper()
	d.cmd.Process.Kill()
	select {
	case err := <-d.done:
		d.done <- err
	case <-time.After(10 * time.Second):
		t.Fatalf("ipsecd in %s did not die within 10 s of SIGKILL", d.ns.name)
	}
}

// withDPD is an ikeSide config with dpd_delay d in place of 2s.
func withDPD(cfg, d string) string { return strings.Replace(cfg, "dpd_delay: 2s", "dpd_delay: "+d, 1) }

// TestIKEInitialContact: A initiates to B; A's daemon is killed (no
// delete reaches B) and started again from the same config and
// state_dir. Its new IKE_AUTH carries INITIAL_CONTACT (it holds no IKE SA
// with B), so B drops the stale IKE SA and its child at once: B lists
// exactly A's new IKE SA as soon as that is up, with no liveness check to
// find out (dpd_delay off), and traffic crosses on the new child.
func TestIKEInitialContact(t *testing.T) {
	p := newPair(t)
	b := startDaemon(t, p.b, withDPD(ikeSide(underlayB4, underlayA4, "b.example.net", "a.example.net", innerB4, prefix24(innerA4), "none", ""), "0s"))
	a := startDaemon(t, p.a, withDPD(ikeSide(underlayA4, underlayB4, "a.example.net", "b.example.net", innerA4, prefix24(innerB4), "start", ""), "0s"))
	old := b.waitIKE("a child", anyChild)
	a.waitIKE("a child", anyChild)
	ping(t, p.a, innerB4, 3)

	a.kill(t)
	if n := len(b.ikeList()); n != 1 {
		t.Fatalf("B lists %d IKE SAs after A died, want the stale one", n)
	}
	a.start()
	fresh := a.waitIKE("a child after the restart", anyChild)
	upAt := time.Now()
	// B drops the old SA and its child before it installs the new child
	// (the event comes first): at once, only the new IKE SA is
	// established and only the new child's pair is in B's SAD. The old
	// SA stays listed (not established) for the daemon's 2 s grace for
	// late answers, then goes.
	var sas []control.IKESAInfo
	established := func() (n int) {
		sas = b.ikeList()
		for _, s := range sas {
			if s.State == "ESTABLISHED" {
				n++
			}
		}
		return n
	}
	for deadline := upAt.Add(time.Second); established() != 1 || len(b.states()) != 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			out, _ := b.ctl("ike", "list")
			t.Fatalf("B: %d established IKE SAs and %d SAs in its SAD 1 s after A's new IKE SA (%s) came up, want only the new one and its pair:\n%s", established(), len(b.states()), fresh.SPIInitiator, out)
		}
	}
	dropped := time.Since(upAt)
	for deadline := upAt.Add(4 * time.Second); len(sas) != 1; sas = b.ikeList() {
		if time.Now().After(deadline) {
			out, _ := b.ctl("ike", "list")
			t.Fatalf("B lists %d IKE SAs 4 s after A's new one (%s) came up, want only the new one:\n%s", len(sas), fresh.SPIInitiator, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("B holds only the new IKE SA and child %.0f ms after A listed them up; lists only it after %.1f s", float64(dropped.Microseconds())/1000, time.Since(upAt).Seconds())
	if sas[0].SPIInitiator == old.SPIInitiator || len(sas[0].Children) != 1 || sas[0].Children[0].SPIIn == old.Children[0].SPIIn {
		t.Errorf("B's IKE SA after A's restart: %+v; want a new one with one new child (the old was %s)", sas[0], old.SPIInitiator)
	}
	if got := strings.Count(b.log.String(), "the peer restarted (INITIAL_CONTACT)"); got != 1 {
		t.Errorf("B's log: %d lines saying the peer restarted, want 1", got)
	}
	ping(t, p.a, innerB4, 3)
	ping(t, p.b, innerA4, 3)
}

// TestIKETrap: A's child has start_action trap (B's none): no IKE SA
// comes up until traffic does. A ping from A into the tunnel finds the
// trap policy with no SA: its first packet is dropped and counted
// (XfrmOutNoStates) and raises an acquire that initiates, and the ping
// gets answers within a few seconds. Then dpd_action trap: B is killed,
// A's liveness check finds it dead and clears the IKE SA and child, the
// trap policy stays, and when B runs again traffic from A brings the
// tunnel up the same way. The log gives each time from the first packet
// to the first answer.
func TestIKETrap(t *testing.T) {
	p := newPair(t)
	b := startDaemon(t, p.b, ikeSide(underlayB4, underlayA4, "b.example.net", "a.example.net", innerB4, prefix24(innerA4), "none", ""))
	cfgA := strings.Replace(ikeSide(underlayA4, underlayB4, "a.example.net", "b.example.net", innerA4, prefix24(innerB4), "trap", ""),
		"start_action: trap", "start_action: trap\n        dpd_action: trap", 1)
	// A finds B dead within about 4 s of the silence: a liveness check
	// after 2 s, retransmitted after 0.5 s and 0.75 s.
	cfgA = strings.Replace(cfgA, "ike: {port: 500}", "ike: {port: 500, retransmit: {timeout: 500ms, base: 1.5, tries: 2}}", 1)
	a := startDaemon(t, p.a, cfgA)
	a.waitLogCount(t, "ike: 1 connections", 1)
	time.Sleep(500 * time.Millisecond)
	if n := len(a.ikeList()); n != 0 {
		t.Fatalf("A lists %d IKE SAs before any traffic, want none (start_action trap)", n)
	}
	if n := len(b.ikeList()); n != 0 {
		t.Fatalf("B lists %d IKE SAs before any traffic, want none", n)
	}
	// The trap: A's out policy for the child's selectors, with no SA.
	trapped := func(when string) {
		out := a.mustCtl(t, "policy", "list")
		if !strings.Contains(out, "dst "+prefix24(innerB4)+"/24\n\tdir out action allow if_id 0x1") {
			t.Errorf("A's policies %s: want the child's out policy to %s/24:\n%s", when, prefix24(innerB4), out)
		}
	}
	trapped("at start")

	// firstUp pings B from A every 0.1 s until the first answer: the
	// first packet finds the trap with no SA and is dropped (counted),
	// its acquire starts IKE, and the first answer times the negotiation.
	firstUp := func(what string) {
		before := a.stats()["XfrmOutNoStates"]
		sent := time.Now()
		out, err := p.a.run("ping", "-n", "-c", "1", "-i", "0.1", "-w", "10", innerB4)
		took := time.Since(sent)
		if err != nil {
			list, _ := a.ctl("ike", "list")
			t.Fatalf("%s: no ping answered within 10 s of the first packet into the trap: %v\n%s\n%s", what, err, out, list)
		}
		t.Logf("%s: first answer %.0f ms after the first packet into the trap", what, float64(took.Microseconds())/1000)
		if strings.Contains(out, "icmp_seq=1 ") {
			t.Errorf("%s: the first ping into the trap was answered, want it dropped:\n%s", what, out)
		}
		if got := a.stats()["XfrmOutNoStates"] - before; got < 1 {
			t.Errorf("%s: XfrmOutNoStates grew by %d, want the dropped first packet counted", what, got)
		}
	}
	firstUp("start_action trap")
	a.waitIKE("a child brought up by traffic", anyChild)
	ping(t, p.a, innerB4, 3)
	ping(t, p.b, innerA4, 3)

	b.kill(t)
	a.waitLogCount(t, "dpd_action trap: cleared", 1)
	bothEmpty(t, a)
	trapped("after B died")
	b.start()
	firstUp("dpd_action trap, B back")
	ping(t, p.b, innerA4, 3)
}
