package eapradius

import (
	"errors"
	"net/netip"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/internal/radiustest"
)

// waitRecords waits until FreeRADIUS's detail file has n records.
func waitRecords(t *testing.T, fr *radiustest.Server, n int) []map[string]string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		recs := fr.Detail(t)
		if len(recs) >= n || time.Now().After(deadline) {
			if len(recs) < n {
				t.Fatalf("%d accounting records in the detail file after 10 s; want %d: %v", len(recs), n, recs)
			}
			return recs
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFreeRADIUSAccounting: Accounting-On, a session's Start,
// Interim-Updates at the interval asked (1 s here), Stop with the bytes
// and packets each way (past 2^32, in the Gigawords) and the cause, and
// Accounting-Off appear in FreeRADIUS's detail file, in order, with the
// values sent; On and Off name the NAS by the address they left from.
func TestFreeRADIUSAccounting(t *testing.T) {
	fr := radiustest.Start(t, radiustest.Options{Users: testUsers})
	c := testClient(t, Config{Servers: []Server{{Address: fr.Auth, AcctAddress: fr.Acct, Secret: []byte(fr.Secret)}}})
	acct := c.NewAccounting()
	defer acct.Close()
	on := make(chan error, 1)
	acct.On(func(err error) { on <- err })
	if err := <-on; err != nil {
		t.Fatalf("Accounting-On: %v", err)
	}
	var reads atomic.Uint64
	s := Session{
		ID: "sess-1", UserName: "alice", Peer: testPeer,
		FramedIP: netip.MustParseAddr("10.3.0.7"), Class: [][]byte{[]byte("gold")},
		Interim: time.Second,
		Usage: func() Usage {
			n := reads.Add(1)
			return Usage{InOctets: 1000 * n, OutOctets: 2000 * n, InPackets: 10 * n, OutPackets: 20 * n}
		},
	}
	if err := acct.Start(s); err != nil {
		t.Fatal(err)
	}
	if err := acct.Start(s); !errors.Is(err, ErrSessionExists) {
		t.Errorf("a second Start: %v; want ErrSessionExists", err)
	}
	recs := waitRecords(t, fr, 3) // On, Start, the first Interim-Update
	if !acct.Stop("sess-1", Usage{InOctets: 5<<32 + 7, OutOctets: 123456, InPackets: 4000000, OutPackets: 3000}, CauseIdleTimeout) {
		t.Fatal("Stop of a started session returned false")
	}
	if acct.Stop("sess-1", Usage{}, CauseUserRequest) {
		t.Error("a second Stop returned true")
	}
	recs = waitRecords(t, fr, 4)
	off := make(chan error, 1)
	acct.Off(func(err error) { off <- err })
	if err := <-off; err != nil {
		t.Fatalf("Accounting-Off: %v", err)
	}
	recs = waitRecords(t, fr, 5)

	want := []map[string]string{
		// No nas_ip: a request of no session names the address it
		// leaves from.
		{"Acct-Status-Type": "Accounting-On", "NAS-Identifier": "ipsecd", "NAS-IP-Address": "127.0.0.1"},
		{"Acct-Status-Type": "Start", "Acct-Session-Id": "sess-1", "User-Name": "alice", "Framed-IP-Address": "10.3.0.7",
			"Class": "0x676f6c64", "NAS-Port": "7", "NAS-IP-Address": "198.51.100.1", "Calling-Station-Id": "192.0.2.10[4500]"},
		{"Acct-Status-Type": "Interim-Update", "Acct-Session-Id": "sess-1", "Acct-Input-Octets": "1000", "Acct-Output-Octets": "2000",
			"Acct-Input-Packets": "10", "Acct-Output-Packets": "20", "Acct-Session-Time": "1"},
		{"Acct-Status-Type": "Stop", "Acct-Session-Id": "sess-1", "Acct-Input-Octets": "7", "Acct-Input-Gigawords": "5",
			"Acct-Output-Octets": "123456", "Acct-Input-Packets": "4000000", "Acct-Output-Packets": "3000",
			"Acct-Terminate-Cause": "Idle-Timeout", "Framed-IP-Address": "10.3.0.7"},
		{"Acct-Status-Type": "Accounting-Off", "NAS-IP-Address": "127.0.0.1"},
	}
	for i, w := range want {
		for k, v := range w {
			if recs[i][k] != v {
				t.Errorf("record %d (%s): %s = %q; want %q", i, recs[i]["Acct-Status-Type"], k, recs[i][k], v)
			}
		}
	}
	if _, ok := recs[1]["Acct-Input-Octets"]; ok {
		t.Error("Start carries usage")
	}
	if n := c.Stats()[0].AcctResponses; n != 5 {
		t.Errorf("%d Accounting-Responses; want 5", n)
	}
	t.Logf("records: %d; the interim came after %s s of session", len(recs), recs[2]["Acct-Session-Time"])
}

// TestInterimStopsWithSession: no Interim-Update follows a Stop.
func TestInterimStopsWithSession(t *testing.T) {
	fr := radiustest.Start(t, radiustest.Options{Users: testUsers})
	c := testClient(t, Config{Servers: []Server{{Address: fr.Auth, AcctAddress: fr.Acct, Secret: []byte(fr.Secret)}}})
	acct := c.NewAccounting()
	defer acct.Close()
	for i := range 3 {
		acct.Start(Session{ID: "s" + strconv.Itoa(i), UserName: "alice", Interim: 300 * time.Millisecond})
	}
	for i := range 3 {
		acct.Stop("s"+strconv.Itoa(i), Usage{}, CauseUserRequest)
	}
	waitRecords(t, fr, 6)
	time.Sleep(700 * time.Millisecond) // two intervals
	if recs := fr.Detail(t); len(recs) != 6 {
		t.Errorf("%d records after the Stops; want the 6 of Start and Stop", len(recs))
	}
	if len(acct.Sessions()) != 0 {
		t.Errorf("sessions %v left", acct.Sessions())
	}
}
