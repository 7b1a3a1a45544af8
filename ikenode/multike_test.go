package ikenode

import (
	"strings"
	"testing"
)

// TestTimersMultiKE: an IKE SA of x25519 + ML-KEM-768 is rekeyed at its
// rekey_time, the additional exchange run again in IKE_FOLLOWUP_KE: a
// new IKE SA with the same exchanges and the child mirrored on both
// sides; ipsecd ike rekey does the same on demand.
func TestTimersMultiKE(t *testing.T) {
	pq := "aes256-sha384-x25519-ke1_mlkem768"
	a, b := pairUp(t, sideOpts{proposals: pq, start: "start", ikeRekey: "30s"}, sideOpts{proposals: pq, ikeRekey: "1h"})
	a.net.waitFor(t, "the first child", func() bool { return matched(a.node, b.node, 1) && established(a) && established(b) })
	first := list(t, a)[0]
	if got := strings.Join(first.KeyExchanges, " "); got != "dh-group=CURVE_25519 ake1=ML_KEM_768" {
		t.Fatalf("key exchanges %q", got)
	}
	rekeyed := func(from string) func() bool {
		return func() bool {
			l, _ := a.m.List()
			return len(l) == 1 && l[0].State == "ESTABLISHED" && l[0].SPIInitiator != from &&
				strings.Join(l[0].KeyExchanges, " ") == "dh-group=CURVE_25519 ake1=ML_KEM_768" && matched(a.node, b.node, 1) && established(b)
		}
	}
	a.net.waitFor(t, "the IKE SA rekeyed at its rekey_time", rekeyed(first.SPIInitiator))
	second := list(t, a)[0]
	if err := a.m.Rekey(Target{IKE: "peer"}); err != nil {
		t.Fatal(err)
	}
	a.net.waitFor(t, "the IKE SA rekeyed by ike rekey", rekeyed(second.SPIInitiator))
}
