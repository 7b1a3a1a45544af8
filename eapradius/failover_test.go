package eapradius

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/ike/eap"
	"github.com/ipsecd/ipsecd/internal/radiustest"
)

// blackHole is a UDP socket that reads and never answers: a server
// that is down without the ICMP that a closed port would send.
func blackHole(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc.LocalAddr().String()
}

// TestFailover: the first server never answers; the conversation moves
// to FreeRADIUS after the first's tries (0.2 s + 0.28 s), the first is
// marked dead, and the next conversations, 20 at once, go straight to
// the second without waiting on the first.
func TestFailover(t *testing.T) {
	fr := radiustest.Start(t, radiustest.Options{Users: testUsers})
	c := testClient(t, Config{
		Servers: []Server{
			{Name: "dead", Address: blackHole(t), Secret: []byte(fr.Secret)},
			{Name: "fr", Address: fr.Auth, Secret: []byte(fr.Secret)},
		},
		Timeout: 200 * time.Millisecond, Base: 1.4, Tries: 2,
	})
	start := time.Now()
	st, pst, _ := relay(t, c.NewConversation(testPeer), eap.NewClient(eap.ClientConfig{Identity: "alice", Secret: []byte("alice-mschapv2-pw")}))
	took := time.Since(start)
	if st.Status != eap.Succeeded || pst != eap.Succeeded {
		t.Fatalf("gateway %v (%v), peer %v; want succeeded through the second server", st.Status, st.Err, pst)
	}
	if took < 480*time.Millisecond || took > 1500*time.Millisecond {
		t.Errorf("took %v; want the first server's 0.48 s and little more", took)
	}
	t.Logf("failover: authenticated in %v", took)

	start = time.Now()
	var wg sync.WaitGroup
	results := make([]eap.Status, 20)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, _, _ := relay(t, c.NewConversation(testPeer), eap.NewClient(eap.ClientConfig{Identity: "alice", Secret: []byte("alice-mschapv2-pw")}))
			results[i] = st.Status
		}()
	}
	wg.Wait()
	took = time.Since(start)
	for i, s := range results {
		if s != eap.Succeeded {
			t.Errorf("conversation %d: %v", i, s)
		}
	}
	if took > 400*time.Millisecond {
		t.Errorf("20 conversations took %v; want them all past the dead server at once (< 0.4 s)", took)
	}
	t.Logf("20 conversations while the first server is dead: %v", took)
	stats := c.Stats()
	if stats[0].Requests != 2 || stats[0].Retransmits != 1 || stats[0].Timeouts != 1 {
		t.Errorf("dead server %+v; want 2 requests, 1 retransmission, 1 timeout", stats[0])
	}
	if stats[1].Accepts != 21 {
		t.Errorf("second server %+v; want 21 accepts", stats[1])
	}
}

// TestDeadServerDoesNotBlock: while a conversation waits on a server that
// never answers, a conversation with a live server finishes at once, and
// Close ends the waiting one with ErrClosed.
func TestDeadServerDoesNotBlock(t *testing.T) {
	fr := radiustest.Start(t, radiustest.Options{Users: testUsers})
	dead := testClient(t, Config{Servers: []Server{{Address: blackHole(t), Secret: []byte("s")}}, Timeout: time.Hour, Tries: 1})
	live := testClient(t, Config{Servers: []Server{{Address: fr.Auth, Secret: []byte(fr.Secret)}}})
	cv := dead.NewConversation(testPeer)
	req, _ := cv.Start()
	resp, _, _ := eap.NewClient(eap.ClientConfig{Identity: "alice", Secret: []byte("x")}).Handle(req)
	waiting := make(chan Step, 1)
	cv.Handle(resp, func(s Step) { waiting <- s })

	start := time.Now()
	st, _, _ := relay(t, live.NewConversation(testPeer), eap.NewClient(eap.ClientConfig{Identity: "alice", Secret: []byte("alice-mschapv2-pw")}))
	if st.Status != eap.Succeeded || time.Since(start) > time.Second {
		t.Fatalf("%v after %v; want succeeded at once", st.Status, time.Since(start))
	}
	select {
	case s := <-waiting:
		t.Fatalf("the dead server's conversation ended: %v", s.Err)
	default:
	}
	dead.Close()
	select {
	case s := <-waiting:
		if s.Status != eap.Failed || s.Err != ErrClosed {
			t.Errorf("%v, %v; want failed with ErrClosed", s.Status, s.Err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the waiting request")
	}
}
