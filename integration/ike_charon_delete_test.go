//go:build linux

package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/internal/charontest"
)

// TestIKECharonDelete: a child and an IKE SA deleted by either side are
// gone from both: ipsecd deletes the child and charon the IKE SA, then,
// with charon having initiated, charon deletes the child and ipsecd the
// IKE SA.
func TestIKECharonDelete(t *testing.T) {
	r := newIKERig(t, ikeSpec{})
	for _, tc := range []struct {
		initiator              string
		deleteChild, deleteIKE func()
	}{
		{"ipsecd", func() { r.ipsecdIKE(t, "terminate", "--child", "net") },
			func() { r.swanctl(t, "--terminate", "--ike", "test", "--timeout", "10") }},
		{"charon", func() { r.swanctl(t, "--terminate", "--child", "net", "--timeout", "10") },
			func() { r.ipsecdIKE(t, "terminate", "--ike", "charon") }},
	} {
		r.up(t, tc.initiator)
		tc.deleteChild()
		r.waitDown(t, "child deleted", 10*time.Second, false)
		if n := len(r.charonIKE()); n != 1 {
			t.Fatalf("charon lists %d IKE SAs after the child's delete, want the one still up:\n%s", n, r.ch.ListSAs())
		}
		tc.deleteIKE()
		r.waitDown(t, "IKE SA deleted", 10*time.Second, true)
		if list := r.ikeList(); strings.Contains(list, "ESTABLISHED") {
			t.Fatalf("ipsecd ike list still shows an established SA:\n%s", list)
		}
	}
}

// TestIKECharonDPD: charon killed (no delete sent) is noticed by
// ipsecd's liveness checks (dpd_delay 1s, retransmissions 0.5 s twice);
// with dpd_action clear the SAs are removed, with restart ipsecd
// initiates again and gets a new tunnel from the charon started in its
// place.
func TestIKECharonDPD(t *testing.T) {
	for _, action := range []string{"clear", "restart"} {
		t.Run(action, func(t *testing.T) {
			r := newIKERig(t, ikeSpec{dpdDelay: "1s", dpdAction: action})
			old := r.up(t, "charon")
			ping(t, r.p.a, innerB4, 2)
			r.ch.Kill()
			killed := time.Now()
			if action == "clear" {
				r.waitDown(t, "charon killed", 15*time.Second, false)
				t.Logf("SAs cleared %v after charon was killed", time.Since(killed).Round(100*time.Millisecond))
				return
			}
			r.ch = charontest.Start(t, r.p.b.name, r.spec.charonConf)
			r.ch.Load(r.spec.charonConn().String())
			r.waitUpWithin(t, "restarted after charon was killed", old, 20*time.Second)
			t.Logf("tunnel up again %v after charon was killed", time.Since(killed).Round(100*time.Millisecond))
			ping(t, r.p.a, innerB4, 2)
		})
	}
}
