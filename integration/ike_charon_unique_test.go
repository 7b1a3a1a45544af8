//go:build linux

package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/internal/charontest"
)

// TestIKECharonUnique: two charon 5.9.8 road warriors prove the same
// identity, rw.test, with the gateway's PSK; they send no INITIAL_CONTACT
// (unique = never on the clients), so the gateway's unique alone decides
// what the second's login does to the first's IKE SA.
//
//   - unique: replace: the gateway deletes the first's IKE SA with a
//     Delete, which the first's charon hears (it lists no SA), and the
//     second gets the first's address, 10.3.0.1, and pings through.
//   - unique: keep: the second's IKE_AUTH is refused with
//     AUTHENTICATION_FAILED (charon says so); the first's IKE SA stays,
//     the same SPIs, and pings through.
func TestIKECharonUnique(t *testing.T) {
	charontest.Require(t)
	for _, policy := range []string{"replace", "keep"} {
		t.Run(policy, func(t *testing.T) {
			p := newPair(t)
			c := thirdOnBridge(t, p)
			first := newPSKWarrior(t, p.b, underlayB4)
			second := newPSKWarrior(t, c, "192.0.2.3")
			first.unique("never")
			second.unique("never")
			d := startDaemon(t, p.a, strings.Replace(pskGateway(), "    pools: [rw]\n", "    pools: [rw]\n    unique: "+policy+"\n", 1))
			first.up(t, d, "first", "10.3.0.1")
			old := d.ikeList()[0]
			if policy == "replace" {
				second.up(t, d, "second, replacing the first", "10.3.0.1")
				first.gone(t, d, "the first, replaced")
				d.waitLog(t, "replaced by a new IKE SA of its identity (unique: replace)")
				deadline := time.Now().Add(10 * time.Second)
				for strings.Contains(first.ch.ListSAs(), "ESTABLISHED") {
					if time.Now().After(deadline) {
						t.Fatalf("the first's charon still holds its IKE SA 10 s after the gateway deleted it:\n%s", first.ch.ListSAs())
					}
					time.Sleep(100 * time.Millisecond)
				}
				if l := d.ikeList(); len(l) != 1 {
					t.Errorf("ipsecd lists %d IKE SAs; want the second's alone", len(l))
				}
				ping(t, c, "198.51.100.1", 2)
				return
			}
			from := second.ch.LogSize()
			if out, err := second.ch.Swanctl("--initiate", "--child", "net", "--timeout", "15"); err == nil {
				t.Fatalf("the second's initiate succeeded; want it refused (unique: keep):\n%s", out)
			}
			if log := second.ch.LogSince(from); !strings.Contains(log, "AUTHENTICATION_FAILED") {
				t.Errorf("the second's charon does not say AUTHENTICATION_FAILED:\n%s", log)
			}
			d.waitLog(t, "the new one is refused with AUTHENTICATION_FAILED (unique: keep)")
			// The refused SA is listed FAILED while it lingers.
			var l []control.IKESAInfo
			for _, s := range d.ikeList() {
				if s.State == "ESTABLISHED" {
					l = append(l, s)
				}
			}
			if len(l) != 1 || l[0].SPIInitiator != old.SPIInitiator || l[0].Remote != old.Remote || len(l[0].Children) != 1 {
				t.Fatalf("ipsecd lists %+v established; want the first's IKE SA (%s_i from %v) alone, with its child", l, old.SPIInitiator, old.Remote)
			}
			ping(t, p.b, "198.51.100.1", 2)
			leases, err := d.ctl("pool", "list", "--leases")
			if err != nil || !strings.Contains(leases, "10.3.0.1") || strings.Contains(leases, "10.3.0.2") {
				t.Errorf("pool list --leases (%v): want the first's 10.3.0.1 alone:\n%s", err, leases)
			}
		})
	}
}
