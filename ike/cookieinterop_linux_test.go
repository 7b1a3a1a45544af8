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
		// Let the flood fill the half-open SAs first.
		if err := d.serve(func() bool { return d.cookiesSent > 100 }); err != nil {
			t.Fatalf("%v (flood: %s)", err, out.String())
		}
		d.while(t, ch, d.up, "--initiate", "--child", "net", "--timeout", "10")
		var ferr error
		if err := d.serve(func() bool {
			select {
			case ferr = <-done:
				finished = true
				return true
			default:
				return false
			}
		}); err != nil {
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
		if len(d.sas) > DefaultCookieThreshold+1 {
			t.Fatalf("%d SAs made during the flood, want at most %d and charon's", len(d.sas), DefaultCookieThreshold)
		}
		t.Logf("%d spoofed requests in %v: %d COOKIE answers, %d half-open SAs; charon's SA up", n, time.Since(start).Round(time.Millisecond), d.cookiesSent, d.halfOpen())
		d.listed(t, ch)
	})
}
