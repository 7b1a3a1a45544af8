package eapradius

import (
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"layeh.com/radius"
	"layeh.com/radius/rfc2866"
)

// slowStartServer is an accounting server on loopback that loses the
// first drop datagrams of each Start (a server busy, or a lossy path:
// the client's retransmission is what gets through) and answers every
// other request at once. It logs what it did, in order: "Start lost",
// "Start", "Stop", ...
type slowStartServer struct {
	pc     net.PacketConn
	secret []byte
	drop   int
	mu     sync.Mutex
	log    []string
}

func newSlowStartServer(t *testing.T, secret []byte, drop int) *slowStartServer {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &slowStartServer{pc: pc, secret: secret, drop: drop}
	done := make(chan struct{})
	go s.serve(done)
	t.Cleanup(func() { pc.Close(); <-done })
	return s
}

func (s *slowStartServer) serve(done chan struct{}) {
	defer close(done)
	buf := make([]byte, radius.MaxPacketLength)
	starts := map[string]int{} // datagrams of each session's Start seen
	for {
		n, from, err := s.pc.ReadFrom(buf)
		if err != nil {
			return
		}
		req, err := radius.Parse(buf[:n], s.secret)
		if err != nil || req.Code != radius.CodeAccountingRequest {
			continue
		}
		status := rfc2866.AcctStatusType_Get(req).String()
		if status == "Start" {
			id := rfc2866.AcctSessionID_GetString(req)
			starts[id]++
			if starts[id] <= s.drop {
				s.record("Start lost")
				continue
			}
		}
		s.record(status)
		s.pc.WriteTo(signAnswer(&radius.Packet{Code: radius.CodeAccountingResponse}, buf[:n], s.secret), from)
	}
}

func (s *slowStartServer) record(what string) {
	s.mu.Lock()
	s.log = append(s.log, what)
	s.mu.Unlock()
}

func (s *slowStartServer) events() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

// TestStopWaitsForStart: a session that ends while its Start is
// unanswered (lost once, or on every try) has its Stop held until the
// Start is answered or given up, so that the server never sees a Stop
// before its Start, and Accounting-Off waits for it. The Stop still
// carries the session's time and usage at its end. Before the Stop was
// held, the server saw "Start lost", "Stop", "Start".
func TestStopWaitsForStart(t *testing.T) {
	secret := []byte("accounting-order-secret")
	for _, tt := range []struct {
		name string
		drop int
		want []string
	}{
		{"start retransmitted", 1, []string{"Start lost", "Start", "Stop", "Accounting-Off"}},
		{"start given up", 2, []string{"Start lost", "Start lost", "Stop", "Accounting-Off"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := newSlowStartServer(t, secret, tt.drop)
			c := testClient(t, Config{
				Servers: []Server{{Address: "127.0.0.1:1", AcctAddress: srv.pc.LocalAddr().String(), Secret: secret}},
				Timeout: 200 * time.Millisecond, Base: 1, Tries: 2,
			})
			acct := c.NewAccounting()
			if err := acct.Start(Session{ID: "short", UserName: "alice", Peer: testPeer}); err != nil {
				t.Fatal(err)
			}
			if !acct.Stop("short", Usage{InOctets: 84, InPackets: 1}, CauseUserRequest) {
				t.Fatal("Stop of a started session returned false")
			}
			if len(acct.Sessions()) != 0 {
				t.Errorf("sessions %v after Stop; want none (the held Stop is no session)", acct.Sessions())
			}
			start := time.Now()
			off := make(chan error, 1)
			acct.Off(func(err error) { off <- err }) // after the held Stop
			if err := <-off; err != nil {
				t.Errorf("Accounting-Off: %v", err)
			}
			acct.Close()
			took := time.Since(start)
			if got := srv.events(); !slices.Equal(got, tt.want) {
				t.Errorf("server saw %q; want %q", got, tt.want)
			}
			if took < 200*time.Millisecond {
				t.Errorf("Off returned after %v; want it to wait for the Start's retransmission (0.2 s)", took)
			}
		})
	}
}

// TestInterimWaitsForStart: Interim-Updates due while the Start waits
// for its answer are skipped, so that the server hears of the session
// first from its Start; those after it go out. The Stop, sent at once
// here, is answered before Accounting-Off goes.
func TestInterimWaitsForStart(t *testing.T) {
	secret := []byte("accounting-order-secret")
	srv := newSlowStartServer(t, secret, 1)
	c := testClient(t, Config{
		Servers: []Server{{Address: "127.0.0.1:1", AcctAddress: srv.pc.LocalAddr().String(), Secret: secret}},
		Timeout: 300 * time.Millisecond, Base: 1, Tries: 2,
	})
	acct := c.NewAccounting()
	defer acct.Close()
	if err := acct.Start(Session{ID: "s", UserName: "alice", Peer: testPeer, Interim: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	// The Start's retransmission is answered at 0.3 s; interims every
	// 0.1 s; at 0.7 s several followed it.
	time.Sleep(700 * time.Millisecond)
	acct.Stop("s", Usage{}, CauseUserRequest)
	off := make(chan error, 1)
	acct.Off(func(err error) { off <- err })
	<-off
	got := srv.events()
	start := slices.Index(got, "Start")
	if start < 0 || slices.Contains(got[:start], "Interim-Update") {
		t.Fatalf("server saw %q; want no Interim-Update before the Start", got)
	}
	if n := strings.Count(strings.Join(got, ","), "Interim-Update"); n < 1 {
		t.Errorf("server saw %q; want Interim-Updates after the Start", got)
	}
	// Off waits for the Stop in flight (it overtook it before).
	if n := len(got); n < 2 || got[n-2] != "Stop" || got[n-1] != "Accounting-Off" {
		t.Errorf("server saw %q; want Stop, then Accounting-Off last", got)
	}
	t.Logf("%q", got)
}
