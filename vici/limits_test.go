package vici_test

import (
	"encoding/binary"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/vici"
)

// rawServer starts a Server with short limits and returns its path.
func rawServer(t *testing.T, tune func(*vici.Server)) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "v.sock")
	s, err := vici.Listen(path, &fakeIKE{sas: twoSAs()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tune != nil {
		tune(s)
	}
	go s.Serve()
	t.Cleanup(func() { s.Close() })
	return path
}

func dial(t *testing.T, path string) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	return c
}

func send(t *testing.T, c net.Conn, p []byte) {
	t.Helper()
	seg := binary.BigEndian.AppendUint32(nil, uint32(len(p)))
	if _, err := c.Write(append(seg, p...)); err != nil {
		t.Fatal(err)
	}
}

func receive(t *testing.T, c net.Conn) *vici.Packet {
	t.Helper()
	seg, err := vici.ReadSegment(c, nil)
	if err != nil {
		t.Fatalf("reading an answer: %v", err)
	}
	p, err := vici.ParsePacket(seg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// closed waits for the server to close c, and fails if it sends
// anything or keeps it open past within.
func closed(t *testing.T, c net.Conn, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	c.SetReadDeadline(start.Add(within))
	n, err := c.Read(make([]byte, 1))
	if err != io.EOF {
		t.Fatalf("read %d bytes, %v; want the server to close the connection", n, err)
	}
	return time.Since(start)
}

func TestMalformedRequestIsAnswered(t *testing.T) {
	c := dial(t, rawServer(t, nil))
	// A request whose message has an unknown element: answered, and the
	// connection goes on.
	send(t, c, []byte{0, 7, 'v', 'e', 'r', 's', 'i', 'o', 'n', 9})
	p := receive(t, c)
	if p.Type != vici.CmdResponse || p.Message.String("success") != "no" ||
		!strings.Contains(p.Message.String("errmsg"), "unknown element type 9") {
		t.Fatalf("got %v %v, want CMD_RESPONSE success=no naming the element", p.Type, p.Message)
	}
	send(t, c, []byte{0, 7, 'v', 'e', 'r', 's', 'i', 'o', 'n'})
	if p := receive(t, c); p.Message.String("daemon") != "ipsecd" {
		t.Fatalf("version after a malformed request: %v", p.Message)
	}
	// A name length of 255 with fewer bytes behind it (1+255 wrapped
	// in a byte once, and the slice panicked the daemon).
	send(t, c, []byte{0, 255, 'v'})
	if p := receive(t, c); p.Type != vici.CmdResponse || !strings.Contains(p.Message.String("errmsg"), "name of 255 bytes truncated") {
		t.Fatalf("a truncated 255-byte name: %v %v", p.Type, p.Message)
	}
	send(t, c, []byte{3, 0}) // register with an empty name
	if p := receive(t, c); p.Type != vici.EventUnknown {
		t.Fatalf("a register without a name: %v, want EVENT_UNKNOWN", p.Type)
	}
	// A packet only servers send ends the connection.
	send(t, c, []byte{1})
	closed(t, c, time.Second)
}

// Two requests sent at once are answered one after the other, in order:
// one command in flight per connection.
func TestRequestsAnsweredInOrder(t *testing.T) {
	c := dial(t, rawServer(t, nil))
	var both []byte
	for _, name := range []string{"stats", "version"} {
		p := append([]byte{0, byte(len(name))}, name...)
		both = append(binary.BigEndian.AppendUint32(both, uint32(len(p))), p...)
	}
	if _, err := c.Write(both); err != nil {
		t.Fatal(err)
	}
	if p := receive(t, c); p.Message.Section("ikesas") == nil {
		t.Fatalf("first answer %v, want stats'", p.Message)
	}
	if p := receive(t, c); p.Message.String("daemon") != "ipsecd" {
		t.Fatalf("second answer %v, want version's", p.Message)
	}
}

func TestOversizedSegmentCloses(t *testing.T) {
	c := dial(t, rawServer(t, nil))
	c.Write([]byte{0, 8, 0, 1}) // 512 KiB + 1
	closed(t, c, time.Second)
}

func TestTimeouts(t *testing.T) {
	path := rawServer(t, func(s *vici.Server) {
		s.IdleTimeout = 200 * time.Millisecond
		s.RequestTimeout = 100 * time.Millisecond
	})
	idle := dial(t, path)
	if d := closed(t, idle, 2*time.Second); d < 150*time.Millisecond {
		t.Errorf("an idle connection closed after %v, before the idle timeout of 200ms", d)
	}
	half := dial(t, path)
	start := time.Now()
	half.Write([]byte{0, 0, 0, 9, 0}) // 1 byte of 9
	closed(t, half, 2*time.Second)
	if d := time.Since(start); d < 80*time.Millisecond || d > 190*time.Millisecond {
		t.Errorf("a half-sent packet closed after %v; want the request timeout of 100ms, not the idle one", d)
	}
}

func TestConnectionsAreBounded(t *testing.T) {
	path := rawServer(t, func(s *vici.Server) { s.MaxConns = 2 })
	a, b := dial(t, path), dial(t, path)
	for _, c := range []net.Conn{a, b} { // both served
		send(t, c, []byte{0, 7, 'v', 'e', 'r', 's', 'i', 'o', 'n'})
		receive(t, c)
	}
	closed(t, dial(t, path), time.Second) // the third is not
	// Once a closes, its slot is free again (the server sees the close
	// a moment later: dial until served).
	a.Close()
	for deadline := time.Now().Add(5 * time.Second); ; {
		c := dial(t, path)
		// A refused connection may be closed before the request is
		// written: then the write fails, or the read.
		c.Write([]byte{0, 0, 0, 9, 0, 7, 'v', 'e', 'r', 's', 'i', 'o', 'n'})
		if _, err := vici.ReadSegment(c, nil); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no connection served within 5 s of one closing")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A client registered for events that stops reading is dropped once an
// event waits longer than the write timeout, and the daemon's Publish
// never waits for it.
func TestStalledEventClientIsDropped(t *testing.T) {
	events := &control.Monitor{}
	path := filepath.Join(t.TempDir(), "v.sock")
	s, err := vici.Listen(path, &fakeIKE{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Events = events
	s.WriteTimeout = 200 * time.Millisecond
	go s.Serve()
	t.Cleanup(func() { s.Close() })
	c := dial(t, path)
	send(t, c, append([]byte{byte(vici.EventRegister), 10}, "ike-updown"...))
	if p := receive(t, c); p.Type != vici.EventConfirm {
		t.Fatalf("register: %v", p.Type)
	}
	waitFor(t, func() bool { return events.Clients() == 1 })
	// About 3 MB of events, far more than the socket buffers, to a
	// client that reads none of them.
	ev := childEvent("ike_up", "gw", "", "")
	start := time.Now()
	for range 10000 {
		events.Publish(ev)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("publishing 10,000 events took %v: the daemon waited for the client", d)
	}
	waitFor(t, func() bool { return events.Clients() == 0 })
	t.Logf("the stalled client was dropped %v after the first event", time.Since(start).Round(time.Millisecond))
}

// A client that closes while its initiate waits for the outcome frees
// the command at once (within hangupCheck), not at the timeout.
func TestHangUpEndsAWaitingCommand(t *testing.T) {
	events := &control.Monitor{}
	path := filepath.Join(t.TempDir(), "v.sock")
	s, err := vici.Listen(path, &fakeIKE{conns: []config.Connection{{Name: "gw", Children: []config.Child{{Name: "net"}}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Events = events
	s.MaxWait = time.Minute
	go s.Serve()
	t.Cleanup(func() { s.Close() })
	c := dial(t, path)
	req, _ := (&vici.Packet{Type: vici.CmdRequest, Name: "initiate", Message: vici.NewMessage().Set("child", "net")}).AppendBinary(nil)
	send(t, c, req)
	waitFor(t, func() bool { return events.Clients() == 1 }) // it waits for the outcome
	start := time.Now()
	c.Close()
	waitFor(t, func() bool { return events.Clients() == 0 })
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the command ended %v after its client closed", d)
	}
}

// Close does not wait for a command that waits for its outcome.
func TestCloseEndsAWaitingCommand(t *testing.T) {
	events := &control.Monitor{}
	path := filepath.Join(t.TempDir(), "v.sock")
	s, err := vici.Listen(path, &fakeIKE{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Events = events
	s.MaxWait = time.Minute
	go s.Serve()
	c := dial(t, path)
	req, _ := (&vici.Packet{Type: vici.CmdRequest, Name: "initiate", Message: vici.NewMessage().Set("ike", "gw")}).AppendBinary(nil)
	send(t, c, req)
	waitFor(t, func() bool { return events.Clients() == 1 })
	start := time.Now()
	s.Close()
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close took %v with an initiate waiting", d)
	}
}
