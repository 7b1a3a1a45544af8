//go:build linux

package ike

import (
	"encoding/hex"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// scapyPython is Debian's interpreter with python3-scapy; the python3 on
// PATH may be another one.
const scapyPython = "/usr/bin/python3"

// floodScript sends argv[2] copies of the IKE_SA_INIT request argv[1]
// (hex), each with a random initiator SPI, from spoofed addresses in
// 10.99.0.0/16 to the driver.
const floodScript = `
import sys, random
from scapy.all import IP, UDP, Raw, send
tmpl = bytes.fromhex(sys.argv[1])
n = int(sys.argv[2])
pkts = [IP(src="10.99.%d.%d" % (i // 250 % 250, i % 250 + 1), dst="192.0.2.2") /
        UDP(sport=500, dport=500) / Raw(random.getrandbits(64).to_bytes(8, "big") + tmpl[8:])
        for i in range(n)]
send(pkts, verbose=0)
`

// floodBound bounds each wait on TestCharonCookies' scapy flood: far
// above the 15 s the whole flood took at a load of 25 on 2 cores.
const floodBound = 2 * time.Minute

// TestCharonCookies: charon, initiating, echoes the cookies we ask for;
// then, while scapy floods us with IKE_SA_INIT requests from 2000
// spoofed addresses, we keep at most the threshold of half-open SAs and
// charon still gets its tunnel up through a cookie.
func TestCharonCookies(t *testing.T) {
	if out, err := exec.Command(scapyPython, "-c", "import scapy.all").CombinedOutput(); err != nil {
		t.Skipf("scapy not available in %s (Debian python3-scapy): %v\n%s", scapyPython, err, out)
	}
	ch, d, nsC, nsG := charonNamespaces(t)
	// The spoofed sources route back towards charon's namespace, which
	// drops our answers to them (and rp_filter keeps the requests).
	nsG.IP(t, "route", "add", "10.99.0.0/16", "via", "192.0.2.1")
	loadTest(ch, "aes256-sha256-x25519", "aes128gcm16")
	cfg := peerConfig(t, "aes256-sha256-x25519", "aes128gcm16")

	t.Run("always", func(t *testing.T) {
		d.reset(cfg)
		d.cookies = &Cookies{Threshold: -1}
		from := ch.LogSize()
		d.while(t, ch, d.up, "--initiate", "--child", "net", "--timeout", "10")
		if d.cookiesSent != 1 {
			t.Fatalf("%d COOKIE answers, want 1", d.cookiesSent)
		}
		if !strings.Contains(ch.LogSince(from), "N(COOKIE)") {
			t.Error("charon's log shows no N(COOKIE)")
		}
		d.while(t, ch, func() bool { return d.sa.State() == StateDeleted }, "--terminate", "--ike", "test", "--timeout", "10")
	})

	t.Run("flood", func(t *testing.T) {
		d.reset(cfg)
		d.cookies = &Cookies{}
		_, tmpl, err := Initiate(cfg, driverAddr, charonAddr, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		const n = 2000
		flood := exec.Command("ip", "netns", "exec", nsC.Name, scapyPython, "-c", floodScript, hex.EncodeToString(tmpl), fmt.Sprint(n))
		var out strings.Builder
		flood.Stdout, flood.Stderr = &out, &out
		start := time.Now()
		if err := flood.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- flood.Wait() }()
		finished := false
		t.Cleanup(func() {
			if !finished {
				flood.Process.Kill()
				<-done
			}
		})
		// scapy goes at the machine's pace: importing it, building the
		// packets and sending them one by one took 6.5 to 15 s at a
		// load of 25 on 2 cores, and once its first 100 requests had
		// not come within serve's 10 s. So the waits on the flood end
		// when it has sent enough or exited, bounded by floodBound.
		var ferr error
		exited := func() bool {
			if finished {
				return true
			}
			select {
			case ferr = <-done:
				finished = true
			default:
			}
			return finished
		}
		// Let the flood fill the half-open SAs first.
		if err := d.serveWithin(floodBound, func() bool { return d.cookiesSent > 100 || exited() }); err != nil {
			t.Fatalf("%v (flood: %s)", err, out.String())
		}
		if finished {
			t.Fatalf("scapy ended after %d COOKIE answers, want more than 100 before charon initiates: %v\n%s", d.cookiesSent, ferr, out.String())
		}
		filled := time.Since(start)
		d.while(t, ch, d.up, "--initiate", "--child", "net", "--timeout", "10")
		if err := d.serveWithin(floodBound, exited); err != nil {
			t.Fatal(err)
		}
		if ferr != nil {
			t.Fatalf("scapy: %v\n%s", ferr, out.String())
		}
		// Answer what is still queued.
		stop := time.Now().Add(500 * time.Millisecond)
		d.serve(func() bool { return time.Now().After(stop) })
		if h := d.halfOpen(); h > DefaultCookieThreshold {
			t.Fatalf("%d half-open SAs, want at most %d", h, DefaultCookieThreshold)
		}
		// A half-open SA gives its place up after HalfOpenTimeout: a
		// flood slower than that may fill the places once more.
		places := DefaultCookieThreshold * (1 + int(time.Since(start)/HalfOpenTimeout))
		if len(d.sas) > places+1 {
			t.Fatalf("%d SAs made during the flood, want at most %d and charon's", len(d.sas), places)
		}
		t.Logf("%d spoofed requests in %v (the first 100 answered after %v): %d COOKIE answers, %d half-open SAs; charon's SA up",
			n, time.Since(start).Round(time.Millisecond), filled.Round(time.Millisecond), d.cookiesSent, d.halfOpen())
		d.listed(t, ch)
	})
}
