//go:build linux

package integration

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/ike/message"
)

// TestIKEHalfOpenFlood: a host in the other namespace that receives at
// its address, and so echoes cookies, sends 200 IKE_SA_INIT requests to
// `ipsecd run` (cookies asked from 2 half-open SAs on) and never goes on
// to IKE_AUTH. ipsecd holds ike.block_threshold (5) half-open SAs of it,
// drops the other requests and counts them in
// ipsecd_ike_dropped_total{reason="block_threshold"}.
func TestIKEHalfOpenFlood(t *testing.T) {
	spec := ikeSpec{ike: "aes256-sha256-x25519", esp: "aes128gcm16", noEncap: true, metrics: true}
	spec.fill()
	p := newPair(t)
	cfg := strings.Replace(spec.ipsecdConfig(""), "  port: 500\n", "  port: 500\n  cookie_threshold: 2\n", 1)
	d := startDaemon(t, p.a, cfg)
	ec := engineConfig(t, spec.ike, spec.esp, false)
	la, ra := netip.MustParseAddrPort(underlayB4+":500"), netip.MustParseAddrPort(underlayA4+":500")
	c := listenUDPIn(t, p.b, la)
	buf := make([]byte, 65536)
	cookies := 0
	for i := range 200 {
		ini, req, err := ike.Initiate(ec, la, ra, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.WriteToUDPAddrPort(req, ra); err != nil {
			t.Fatal(err)
		}
		// Every first request is answered: with a cookie, or (while
		// fewer than 2 are half-open) with the IKE_SA_INIT response.
		// Answers to the echoes before it may come first: skipped.
		spi, _ := ini.SPIs()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		var answer []byte
		for answer == nil {
			n, _, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				t.Fatalf("request %d: no answer: %v", i, err)
			}
			if h := message.Header(buf[:n]); h.IsValid() && h.ISPI() == spi {
				answer = buf[:n]
			}
		}
		next, err := ini.Handle(answer, time.Now())
		if err != nil && !errors.Is(err, ike.ErrDropped) {
			t.Fatalf("request %d: %v", i, err)
		}
		if ini.State() == ike.StateInitSent && next != nil {
			// The cookie, echoed; whatever answers it is not read.
			cookies++
			if _, err := c.WriteToUDPAddrPort(next, ra); err != nil {
				t.Fatal(err)
			}
		}
	}
	var connecting int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		connecting = 0
		for _, s := range d.ikeList() {
			if s.State == "CONNECTING" {
				connecting++
			}
		}
		body := scrape(t, p.a, "http://"+ikeMetricsAddr+"/metrics")
		if strings.Contains(body, "\n"+`ipsecd_ike_dropped_total{reason="block_threshold"} 195`+"\n") && connecting == 5 {
			break
		}
		if time.Now().After(deadline) {
			var lines []string
			for _, l := range strings.Split(body, "\n") {
				if strings.HasPrefix(l, "ipsecd_ike_dropped_total") {
					lines = append(lines, l)
				}
			}
			t.Fatalf("200 IKE_SA_INITs from one host echoing %d cookies: %d half-open (CONNECTING) IKE SAs, want 5; %s", cookies, connecting, strings.Join(lines, ", "))
		}
	}
}
