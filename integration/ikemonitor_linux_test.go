//go:build linux

package integration

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/control"
)

// eventMonitor is `ipsecd monitor --json` on a daemon's control socket,
// its events read as they come.
type eventMonitor struct {
	d      *daemon
	events chan control.Event
}

// monitor starts `ipsecd monitor --json` against d, and returns once it
// is subscribed: a policy added and deleted (an allow policy of a
// documentation prefix, which nothing uses) shows in its stream. It is
// killed when the test ends.
func (d *daemon) monitor(t *testing.T) *eventMonitor {
	t.Helper()
	cmd := exec.Command(ipsecdBin, "monitor", "--json", "--control", d.control)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m := &eventMonitor{d: d, events: make(chan control.Event, 1024)}
	go func() {
		defer close(m.events)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var ev control.Event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Errorf("ipsecd monitor --json printed %q: %v", sc.Text(), err)
				return
			}
			m.events <- ev
		}
	}()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// Subscribed once a change made after it started shows.
	deadline := time.Now().Add(10 * time.Second)
	for {
		d.mustCtl(t, "policy", "add", "--dir", "out", "--if-id", "1", "--dst", "203.0.113.0/24")
		d.mustCtl(t, "policy", "delete", "--dir", "out", "--if-id", "1", "--dst", "203.0.113.0/24")
		select {
		case ev, ok := <-m.events:
			if !ok {
				t.Fatalf("ipsecd monitor ended")
			}
			if ev.Type == "policy_added" {
				// Drain the delete.
				m.next(t, func(ev control.Event) bool { return ev.Type == "policy_deleted" })
				return m
			}
		case <-time.After(500 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("ipsecd monitor in %s saw no event within 10 s", d.ns.name)
		}
	}
}

// next returns the next event that want takes, skipping others; it
// fails the test after 20 s.
func (m *eventMonitor) next(t *testing.T, want func(control.Event) bool) control.Event {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-m.events:
			if !ok {
				t.Fatalf("ipsecd monitor in %s ended", m.d.ns.name)
			}
			if want(ev) {
				return ev
			}
		case <-timeout:
			t.Fatalf("ipsecd monitor in %s: no such event within 20 s", m.d.ns.name)
		}
	}
}

// nextIKE returns the next of IKE's events (ike_*, child_*).
func (m *eventMonitor) nextIKE(t *testing.T) control.Event {
	t.Helper()
	return m.next(t, func(ev control.Event) bool {
		return strings.HasPrefix(ev.Type, "ike_") || strings.HasPrefix(ev.Type, "child_")
	})
}

// TestIKEMonitor: `ipsecd monitor --json` shows IKE's own events from
// the real daemons: when A brings the tunnel up, ike_up and child_up on
// both sides, naming the connection, the child, the peer's identity and
// the SPIs ike list shows; when B terminates it, child_down and ike_down
// on both, A's deleted by peer, B's terminated.
func TestIKEMonitor(t *testing.T) {
	p := newPair(t)
	b := startDaemon(t, p.b, ikeSide(underlayB4, underlayA4, "b.example.net", "a.example.net", innerB4, prefix24(innerA4), "none", ""))
	a := startDaemon(t, p.a, ikeSide(underlayA4, underlayB4, "a.example.net", "b.example.net", innerA4, prefix24(innerB4), "none", ""))
	ma, mb := a.monitor(t), b.monitor(t)

	a.mustCtl(t, "ike", "initiate", "--ike", "peer")
	sa := a.waitIKE("a child", anyChild)
	for _, side := range []struct {
		m      *eventMonitor
		peerID string
	}{{ma, "b.example.net"}, {mb, "a.example.net"}} {
		up, child := side.m.nextIKE(t), side.m.nextIKE(t)
		if up.Type != "ike_up" || up.Detail["connection"] != "peer" || up.Detail["peer_id"] != side.peerID ||
			up.Detail["ike_spi_i"] != sa.SPIInitiator || up.Detail["ike_spi_r"] != sa.SPIResponder {
			t.Errorf("in %s: %+v, want ike_up of peer with %s, SPIs %s %s", side.m.d.ns.name, up, side.peerID, sa.SPIInitiator, sa.SPIResponder)
		}
		if child.Type != "child_up" || child.Detail["child"] != "net" || child.Detail["spi_in"] == "" || child.Detail["spi_out"] == "" {
			t.Errorf("in %s: %+v, want child_up of net with its SPIs", side.m.d.ns.name, child)
		}
	}
	ping(t, p.a, innerB4, 2)

	b.mustCtl(t, "ike", "terminate", "--ike", "peer")
	bothEmpty(t, a, b)
	for _, side := range []struct {
		m      *eventMonitor
		reason string
	}{{ma, "deleted by peer"}, {mb, "terminated"}} {
		child, down := side.m.nextIKE(t), side.m.nextIKE(t)
		if child.Type != "child_down" || child.Detail["child"] != "net" || child.Reason != side.reason {
			t.Errorf("in %s: %+v, want child_down of net, %s", side.m.d.ns.name, child, side.reason)
		}
		if down.Type != "ike_down" || down.Reason != side.reason || down.Detail["ike_spi_i"] != sa.SPIInitiator {
			t.Errorf("in %s: %+v, want ike_down of %s, %s", side.m.d.ns.name, down, sa.SPIInitiator, side.reason)
		}
	}
}
