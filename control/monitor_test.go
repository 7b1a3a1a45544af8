package control_test

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/control/controltest"
)

// monitorServer serves a fake backend with an event stream, its write
// timeout set to wt.
func monitorServer(t *testing.T, wt time.Duration) (*control.Server, *control.Monitor) {
	t.Helper()
	dir, err := os.MkdirTemp("", "ipsecd-mon")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	srv, err := control.Listen(filepath.Join(dir, "s.sock"), &controltest.Backend{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mon := &control.Monitor{}
	srv.Events, srv.WriteTimeout = mon, wt
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	t.Cleanup(func() { srv.Close(); <-done })
	return srv, mon
}

// waitClients waits up to 5 s for the monitor to have n clients.
func waitClients(t *testing.T, mon *control.Monitor, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); mon.Clients() != n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("monitor has %d clients after 5 s, want %d", mon.Clients(), n)
		}
	}
}

// TestMonitorSlowClient: a monitor client that stops reading never slows
// Publish (the daemon's changes): its queue fills, the events beyond are
// dropped and counted, and when it reads again it gets every queued event
// and then one events_lost line with the number it missed, so that what
// it got and what it lost add up to what was published.
func TestMonitorSlowClient(t *testing.T) {
	srv, mon := monitorServer(t, 30*time.Second)
	es, err := control.OpenMonitor(srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()
	waitClients(t, mon, 1)
	const total = 100000 // far more than the queue and the socket's buffer hold
	start := time.Now()
	for i := range total {
		mon.Publish(control.Event{Type: "state_added", Reason: strings.Repeat("x", i%7)})
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("publishing %d events to a client that does not read took %v", total, took)
	}
	var got, lost uint64
	for got+lost < total {
		ev, err := es.Next()
		if err != nil {
			t.Fatalf("after %d events and %d lost: %v", got, lost, err)
		}
		if ev.Type == "events_lost" {
			lost += ev.Lost
			continue
		}
		got++
	}
	if lost == 0 || got < control.MonitorQueue {
		t.Errorf("got %d events and %d lost, want at least the queue (%d) and some lost", got, lost, control.MonitorQueue)
	}
	if got+lost != total {
		t.Errorf("got %d + lost %d = %d, want %d", got, lost, got+lost, total)
	}
}

// TestMonitorDeadClient: a client that never reads is dropped once a
// write has waited the write timeout, and its slot freed; Publish never
// waits for it.
func TestMonitorDeadClient(t *testing.T) {
	srv, mon := monitorServer(t, 200*time.Millisecond)
	c, err := net.Dial("unix", srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte(`{"cmd":"monitor"}` + "\n"))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.Contains(line, `"ok":true`) {
		t.Fatalf("monitor answer %q, %v", line, err)
	}
	waitClients(t, mon, 1)
	start := time.Now()
	for range 100000 {
		mon.Publish(control.Event{Type: "state_deleted", Reason: strings.Repeat("y", 100)})
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("publishing to a dead client took %v", took)
	}
	waitClients(t, mon, 0)
	// The connection goes with the subscription.
	for deadline := time.Now().Add(5 * time.Second); srv.NumConns() != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections left 5 s after the dead client was dropped", srv.NumConns())
		}
	}
}

// TestMonitorWire: the monitor answers ok and then one event per line,
// in snake_case, and a server without events refuses it.
func TestMonitorWire(t *testing.T) {
	srv, mon := monitorServer(t, 0)
	es, err := control.OpenMonitor(srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()
	waitClients(t, mon, 1)
	mon.Publish(control.Event{Type: "state_expired", State: &control.EventState{SPI: "0x1001", Dir: "out", Dst: "192.0.2.2", Src: "192.0.2.1", IfID: 1},
		Expire: "soft", Reason: "packets"})
	ev, err := es.Next()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(ev)
	for _, want := range []string{`"type":"state_expired"`, `"state":{"spi":"0x1001","dir":"out","dst":"192.0.2.2","src":"192.0.2.1","if_id":1}`, `"expire":"soft"`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("event %s lacks %s", raw, want)
		}
	}
	plain := controltest.Start(t, &controltest.Backend{})
	if _, err := control.OpenMonitor(plain.Path()); err == nil || !strings.Contains(err.Error(), "no event stream") {
		t.Errorf("monitor of a server without events: %v", err)
	}
}
