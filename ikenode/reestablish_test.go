package ikenode

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestReestablishMultiKE: an IKE SA with an additional key exchange
// (x25519 + ML-KEM-768) cannot be rekeyed without IKE_FOLLOWUP_KE; at
// its rekey_time A deletes it and initiates anew: a new IKE SA with new
// SPIs and the same exchanges, its child installed on both sides, and
// the old SA's end reported as re-established. ipsecd ike rekey of it
// says why it cannot.
func TestReestablishMultiKE(t *testing.T) {
	pq := "aes256-sha384-x25519-ke1_mlkem768"
	a, b := pairUp(t, sideOpts{proposals: pq, start: "start", ikeRekey: "30s"}, sideOpts{proposals: pq, ikeRekey: "1h"})
	a.net.waitFor(t, "the first child", func() bool { return matched(a.node, b.node, 1) && established(a) && established(b) })
	first := list(t, a)[0]
	if got := strings.Join(first.KeyExchanges, " "); got != "dh-group=CURVE_25519 ake1=ML_KEM_768" {
		t.Fatalf("key exchanges %q", got)
	}
	if err := a.m.Rekey(Target{IKE: "peer"}); err == nil || !strings.Contains(err.Error(), "IKE_FOLLOWUP_KE") {
		t.Fatalf("ike rekey: %v, want the IKE_FOLLOWUP_KE error", err)
	}
	var last string
	defer func() {
		if t.Failed() {
			t.Log(last)
		}
	}()
	a.net.waitFor(t, "a new IKE SA in place of the first", func() bool {
		l, _ := a.m.List()
		lb, _ := b.m.List()
		last = fmt.Sprintf("A %+v\nB %+v\nmatched %v", l, lb, matched(a.node, b.node, 1))
		return len(l) == 1 && l[0].State == "ESTABLISHED" && l[0].SPIInitiator != first.SPIInitiator &&
			len(l[0].KeyExchanges) == 2 && matched(a.node, b.node, 1) && established(b)
	})
	if !slices.ContainsFunc(a.ev.take(), func(e Event) bool { return e.Type == "ike_down" && e.Reason == ReasonReestablished }) {
		t.Error("no ike_down with reason re-established")
	}
}
