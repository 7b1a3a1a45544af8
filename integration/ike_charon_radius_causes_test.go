//go:build linux

package integration

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/internal/charontest"
	"github.com/ipsecd/ipsecd/internal/radiustest"
)

// TestIKECharonRADIUSCauses: one session each of charon 5.9.8 through the
// real binary to FreeRADIUS, ended each another way, FreeRADIUS's detail
// file telling why (Acct-Terminate-Cause): bob's Accept has
// Session-Timeout 4 and Acct-Interim-Interval 1, so Interim-Updates come
// every second and the gateway deletes the IKE SA after 4 s
// (Session-Timeout); carol's has Idle-Timeout 2 and sends nothing after
// one ping (Idle-Timeout); dave is ended by `ipsecd ike terminate`
// (Admin-Reset); erin's charon is killed and the gateway's DPD finds it
// gone (Lost-Carrier). Accounting-On first, one Start and one Stop per
// session, Accounting-Off at the stop.
func TestIKECharonRADIUSCauses(t *testing.T) {
	charontest.Require(t)
	p := newPair(t)
	users := []radiustest.User{
		{Name: "bob", Password: "bob-pw", Reply: [][2]string{{"Session-Timeout", "4"}, {"Acct-Interim-Interval", "1"}}},
		{Name: "carol", Password: "carol-pw", Reply: [][2]string{{"Idle-Timeout", "2"}}},
		{Name: "dave", Password: "dave-pw"},
		{Name: "erin", Password: "erin-pw"},
	}
	fr := radiustest.Start(t, radiustest.Options{NetNS: p.a.name, Secret: "causes", Users: users})
	dir := t.TempDir()
	caFile, cert, key := raPKI(t, dir)
	p.b.mustRun(t, "ip", "route", "add", "default", "via", underlayA4)
	ch := charontest.Start(t, p.b.name, "")
	conf := radiusGateway(cert, key, "127.0.0.1:9", fr.Auth, fr.Acct, fr.Secret)
	// DPD after a second of silence, given up after 0.5 + 0.5 s.
	conf = strings.Replace(conf, "connections:\n  - name: rw\n", "ike: {retransmit: {timeout: 500ms, base: 1, tries: 1}}\nconnections:\n  - name: rw\n    dpd_delay: 1s\n", 1)
	d := startDaemon(t, p.a, conf)
	up := func(u radiustest.User) time.Time {
		t.Helper()
		ch.Load(charontest.Conn{LocalAddrs: underlayB4, RemoteAddrs: underlayA4, Proposals: "aes256-sha256-x25519", Encap: true,
			Local: charontest.Peer{Auth: "eap-mschapv2", ID: "b.test", EAPID: u.Name}, Remote: charontest.Peer{Auth: "pubkey", ID: "a.test", CACerts: caFile},
			VIPs: "0.0.0.0", RemoteTS: "198.51.100.0/24", ESP: "aes128gcm16", EAPSecret: u.Password}.String())
		if out, err := ch.Swanctl("--initiate", "--child", "net", "--timeout", "20"); err != nil {
			t.Fatalf("%s: swanctl --initiate: %v\n%s", u.Name, err, out)
		}
		d.waitIKE(u.Name+"'s child", anyChild)
		return time.Now()
	}
	// gone waits until no IKE SA is ESTABLISHED (an ended one stays
	// listed a moment, for the answer to its delete).
	established := func() bool {
		for _, s := range d.ikeList() {
			if s.State == "ESTABLISHED" {
				return true
			}
		}
		return false
	}
	gone := func(who string, within time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		for established() {
			if time.Since(start) > within {
				t.Fatalf("%s's IKE SA still there after %v", who, within)
			}
			time.Sleep(50 * time.Millisecond)
		}
		return time.Since(start)
	}
	since := func(from time.Time) time.Duration { return time.Since(from).Round(100 * time.Millisecond) }

	bobUp := up(users[0])
	ping(t, p.b, "198.51.100.1", 1)
	gone("bob", 8*time.Second)
	bobLived := since(bobUp)
	carolUp := up(users[1])
	ping(t, p.b, "198.51.100.1", 1)
	gone("carol", 8*time.Second)
	carolLived := since(carolUp)
	up(users[2])
	if out, err := d.ctl("ike", "terminate", "--ike", "rw"); err != nil {
		t.Fatalf("ipsecd ike terminate: %v\n%s", err, out)
	}
	gone("dave", 5*time.Second)
	up(users[3])
	ch.Kill()
	erinGone := gone("erin", 8*time.Second)
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}

	recs := fr.Detail(t)
	deadline := time.Now().Add(10 * time.Second)
	for len(recs) == 0 || recs[len(recs)-1]["Acct-Status-Type"] != "Accounting-Off" {
		if time.Now().After(deadline) {
			t.Fatalf("no Accounting-Off after the stop: %v", recs)
		}
		time.Sleep(50 * time.Millisecond)
		recs = fr.Detail(t)
	}
	if recs[0]["Acct-Status-Type"] != "Accounting-On" {
		t.Errorf("first record %v; want Accounting-On", recs[0])
	}
	starts, stops, interims := map[string]int{}, map[string]map[string]string{}, map[string]int{}
	for _, r := range recs[1 : len(recs)-1] {
		switch r["Acct-Status-Type"] {
		case "Start":
			starts[r["User-Name"]]++
		case "Interim-Update":
			interims[r["User-Name"]]++
		case "Stop":
			if stops[r["User-Name"]] != nil {
				t.Errorf("a second Stop for %s", r["User-Name"])
			}
			stops[r["User-Name"]] = r
		default:
			t.Errorf("unexpected record %v", r)
		}
	}
	for user, cause := range map[string]string{"bob": "Session-Timeout", "carol": "Idle-Timeout", "dave": "Admin-Reset", "erin": "Lost-Carrier"} {
		s := stops[user]
		if starts[user] != 1 || s == nil || s["Acct-Terminate-Cause"] != cause {
			t.Errorf("%s: %d Starts, Stop %v; want one of each, cause %s", user, starts[user], s, cause)
		}
	}
	// Session-Timeout 4 s, Interim-Updates every second: 3 at least
	// before the Stop, and no other user has any.
	if interims["bob"] < 3 || len(interims) != 1 {
		t.Errorf("Interim-Updates %v; want 3 or more for bob, none for the others", interims)
	}
	if n, _ := strconv.Atoi(stops["bob"]["Acct-Session-Time"]); n < 4 || n > 5 || bobLived < 3500*time.Millisecond || bobLived > 5*time.Second {
		t.Errorf("bob's session: Acct-Session-Time %q, up %v; want 4 s", stops["bob"]["Acct-Session-Time"], bobLived)
	}
	// Idle-Timeout 2 s from the last packet (the ping at once), the
	// counters read each 0.5 s.
	if n, _ := strconv.Atoi(stops["carol"]["Acct-Session-Time"]); n < 2 || n > 3 || carolLived < 2*time.Second || carolLived > 3500*time.Millisecond {
		t.Errorf("carol's idle session: Acct-Session-Time %q, up %v; want 2 to 3 s", stops["carol"]["Acct-Session-Time"], carolLived)
	}
	t.Logf("%d records; bob's %d Interim-Updates, ended after %v; carol idle-ended after %v; erin found gone %v after the kill",
		len(recs), interims["bob"], bobLived, carolLived, erinGone)
}
