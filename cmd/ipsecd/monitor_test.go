package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/daemon"
	"github.com/ipsecd/ipsecd/ikenode"
	ipnode "github.com/ipsecd/ipsecd/node"
	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/sa/satest"
	"github.com/ipsecd/ipsecd/xfrmif"
	"github.com/ipsecd/ipsecd/xfrmif/xfrmiftest"
)

// monitorNode is newCtlNode with the node's events streamed on its
// control socket, as daemon.Start wires them.
func monitorNode(t *testing.T) *ctlNode {
	t.Helper()
	log := logrus.New()
	log.SetOutput(io.Discard)
	mon := &control.Monitor{}
	n := newTestNode(t, log, ipnode.Config{EphemeralKeys: true, Events: func(ev ipnode.Event) { mon.Publish(daemon.MonitorEvent(ev)) }})
	n.events = mon
	n.reg.Create = func(c xfrmif.Config) (*xfrmif.Interface, error) {
		return xfrmif.NewInterface(c, xfrmiftest.NewIdleLink(c.Queues))
	}
	if _, err := n.core.SyncInterfaces([]xfrmif.Config{{Name: "ipsec1", IfID: 1}}); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "ipsecd-mon")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	srv, err := control.Listen(filepath.Join(dir, "s.sock"), n.backend, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv.Events = mon
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	t.Cleanup(func() { srv.Close(); <-done })
	return &ctlNode{t: t, n: n, sock: srv.Path(), stop: func() { srv.Close() }}
}

// monitorCLI runs `ipsecd monitor` with args until the test ends, and
// returns a function that waits up to 5 s for its next line.
func (c *ctlNode) monitorCLI(args ...string) func() string {
	c.t.Helper()
	subscribed := c.n.events.Clients() + 1
	pr, pw := io.Pipe()
	exited := make(chan int, 1)
	go func() {
		exited <- run(append([]string{"monitor", "--control", c.sock}, args...), pw, io.Discard)
		pw.Close()
	}()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	c.t.Cleanup(func() {
		c.stop() // as the daemon stops: the monitor ends
		pr.Close()
		select {
		case <-exited: // the server's close ended it
		case <-time.After(5 * time.Second):
			c.t.Error("ipsecd monitor still runs 5 s after the daemon closed")
		}
	})
	for deadline := time.Now().Add(5 * time.Second); c.n.events.Clients() < subscribed; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			c.t.Fatal("ipsecd monitor did not subscribe within 5 s")
		}
	}
	return func() string {
		c.t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				c.t.Fatal("ipsecd monitor ended")
			}
			return l
		case <-time.After(5 * time.Second):
			c.t.Fatal("no event within 5 s")
			return ""
		}
	}
}

// TestMonitor: `ipsecd monitor --json` streams, as they happen, SAs
// added, updated, deleted and expired (the hard expiry, then its
// removal), policies added and deleted, interfaces up and down; and the
// text form prints one ip-xfrm-like line per event.
func TestMonitor(t *testing.T) {
	c := monitorNode(t)
	next := c.monitorCLI("--json")
	text := c.monitorCLI()
	expect := func(want ...string) {
		t.Helper()
		line := next()
		var ev control.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		for _, w := range want {
			if !strings.Contains(line, w) {
				t.Errorf("event %s lacks %s", line, w)
			}
		}
	}
	c.addSA("0x1001", "out")
	expect(`"type":"state_added"`, `"spi":"0x1001","dir":"out","dst":"192.0.2.2","src":"192.0.2.1","if_id":1`)
	if got := text(); !strings.HasSuffix(got, " state_added spi 0x1001 dir out dst 192.0.2.2 src 192.0.2.1 if_id 1") {
		t.Errorf("text: %q", got)
	}
	c.ipsecd(0, "state", "update", "--spi", "0x1001", "--dst", "192.0.2.2", "--hard-packets", "1")
	expect(`"type":"state_updated"`, `"spi":"0x1001"`)
	c.ipsecd(0, "policy", "add", "--dir", "out", "--if-id", "1", "--dst", "10.1.0.0/24")
	expect(`"type":"policy_added"`, `"policy":{"dir":"out","if_id":1,"dst":"10.1.0.0/24","action":"allow"}`)
	c.ipsecd(0, "policy", "delete", "--dir", "out", "--if-id", "1", "--dst", "10.1.0.0/24")
	expect(`"type":"policy_deleted"`)

	// Two packets under hard_packets 1: the second expires the SA,
	// and the node's ticker removes it.
	s := c.n.sad.States()[0]
	satest.Seal(t, s, satest.IPv4UDP(netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), 40))
	ps := []sa.Packet{satest.NewPacket(satest.IPv4UDP(netip.MustParseAddr("198.51.100.10"), netip.MustParseAddr("203.0.113.10"), 40))}
	if s.SealBatch(ps); ps[0].Drop != sa.XfrmOutStateExpired {
		t.Fatalf("second packet under hard_packets 1: drop %v, want %v", ps[0].Drop, sa.XfrmOutStateExpired)
	}
	expect(`"type":"state_expired"`, `"expire":"hard"`, `"reason":"packets"`)
	expect(`"type":"state_deleted"`, `"reason":"hard lifetime expired"`)

	c.addSA("0x1002", "out")
	expect(`"type":"state_added"`, `"spi":"0x1002"`)
	c.ipsecd(0, "state", "delete", "--spi", "0x1002", "--dst", "192.0.2.2")
	expect(`"type":"state_deleted"`, `"spi":"0x1002"`, `"reason":"deleted"`)

	if _, err := c.n.core.SyncInterfaces([]xfrmif.Config{{Name: "ipsec1", IfID: 1}, {Name: "ipsec2", IfID: 2}}); err != nil {
		t.Fatal(err)
	}
	expect(`"type":"interface_up"`, `"interface":"ipsec2","if_id":2`)
	if _, err := c.n.core.SyncInterfaces([]xfrmif.Config{{Name: "ipsec1", IfID: 1}}); err != nil {
		t.Fatal(err)
	}
	expect(`"type":"interface_down"`, `"interface":"ipsec2","if_id":2`)
}

// TestMonitorEscapes: an event's text (an IKE event's detail names the
// peer) is printed on one line with control characters escaped.
func TestMonitorEscapes(t *testing.T) {
	ev := control.Event{Type: "ike_up", Detail: map[string]string{"peer_id": "\x1b[2J\r\nfake", "connection": "rw"}}
	got := eventText(&ev)
	if strings.ContainsAny(got, "\x1b\r\n") {
		t.Fatalf("monitor printed control characters: %q", got)
	}
	if !strings.HasSuffix(got, ` ike_up connection rw peer_id \x1b[2J\x0d\x0afake`) {
		t.Errorf("monitor printed %q, want the peer escaped", got)
	}
}

// TestMonitorIKE: IKE's events as the daemon hands them to the monitor
// (daemon.IKEEvent): --json carries the type, the reason and the detail
// under control's Detail* keys, only those set; the text form prints
// the detail in its order, the reason, and the error last.
func TestMonitorIKE(t *testing.T) {
	c := monitorNode(t)
	next := c.monitorCLI("--json")
	text := c.monitorCLI()
	l, r := netip.MustParseAddrPort("192.0.2.1:500"), netip.MustParseAddrPort("192.0.2.2:4500")
	up := ikenode.Event{Type: ikenode.EventIKEUp, Connection: "gw", SPIInitiator: "8f957894685ad3e7", SPIResponder: "21e5cb45811bbd55",
		Local: l, Remote: r, LocalID: "a.test", PeerID: `C=CH, CN=\x1b[2J`}
	rekeyed := up
	rekeyed.Type, rekeyed.Child, rekeyed.Reason = ikenode.EventChildRekeyed, "net", ikenode.ReasonRekeyedByUs
	rekeyed.SPIIn, rekeyed.SPIOut, rekeyed.OldSPIIn, rekeyed.OldSPIOut = "0xc0000003", "0xc0000004", "0xc0000001", "0xc0000002"
	failed := ikenode.Event{Type: ikenode.EventIKEFailed, Connection: "gw", SPIInitiator: "8f957894685ad3e7", SPIResponder: "0000000000000000",
		Local: l, Remote: r, LocalID: "a.test", Reason: ikenode.ReasonAuthFailed, Error: "ike: authentication failed: the responder refused our AUTH"}
	for _, tt := range []struct {
		ev         ikenode.Event
		json, text string
	}{
		{up, `{"type":"ike_up","detail":{"connection":"gw","ike_spi_i":"8f957894685ad3e7","ike_spi_r":"21e5cb45811bbd55","local":"192.0.2.1:500","local_id":"a.test","peer_id":"C=CH, CN=\\x1b[2J","remote":"192.0.2.2:4500"}}`,
			` ike_up connection gw ike_spi_i 8f957894685ad3e7 ike_spi_r 21e5cb45811bbd55 local 192.0.2.1:500 remote 192.0.2.2:4500 local_id a.test peer_id C=CH, CN=\x1b[2J`},
		{rekeyed, `{"type":"child_rekeyed","reason":"rekeyed by us","detail":{"child":"net","connection":"gw","ike_spi_i":"8f957894685ad3e7","ike_spi_r":"21e5cb45811bbd55","local":"192.0.2.1:500","local_id":"a.test","old_spi_in":"0xc0000001","old_spi_out":"0xc0000002","peer_id":"C=CH, CN=\\x1b[2J","remote":"192.0.2.2:4500","spi_in":"0xc0000003","spi_out":"0xc0000004"}}`,
			` child_rekeyed connection gw child net ike_spi_i 8f957894685ad3e7 ike_spi_r 21e5cb45811bbd55 local 192.0.2.1:500 remote 192.0.2.2:4500 local_id a.test peer_id C=CH, CN=\x1b[2J spi_in 0xc0000003 spi_out 0xc0000004 old_spi_in 0xc0000001 old_spi_out 0xc0000002 reason rekeyed by us`},
		{failed, `{"type":"ike_failed","reason":"authentication failed","detail":{"connection":"gw","error":"ike: authentication failed: the responder refused our AUTH","ike_spi_i":"8f957894685ad3e7","ike_spi_r":"0000000000000000","local":"192.0.2.1:500","local_id":"a.test","remote":"192.0.2.2:4500"}}`,
			` ike_failed connection gw ike_spi_i 8f957894685ad3e7 ike_spi_r 0000000000000000 local 192.0.2.1:500 remote 192.0.2.2:4500 local_id a.test reason authentication failed error ike: authentication failed: the responder refused our AUTH`},
	} {
		c.n.events.Publish(daemon.IKEEvent(tt.ev))
		line := next()
		// The time is the publisher's: compare the rest.
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		delete(m, "time")
		var want map[string]any
		if err := json.Unmarshal([]byte(tt.json), &want); err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(m)
		if w, _ := json.Marshal(want); string(got) != string(w) {
			t.Errorf("--json:\n got %s\nwant %s", got, w)
		}
		if got := text(); !strings.HasSuffix(got, tt.text) {
			t.Errorf("text:\n got %q\nwant suffix %q", got, tt.text)
		}
	}
}
