package ikenode

import (
	"testing"
	"time"
)

// BenchmarkEstablish is one IKE SA with its child, from Initiate to both
// sides' pairs installed, between two IKE daemons on loopback (x25519,
// AES-GCM, PSK): the handshake as the daemon runs it, sockets and
// goroutine hops included. Each iteration then terminates the SA
// (outside the timer).
func BenchmarkEstablish(b *testing.B) {
	a, r := pairOn(b, nil, sideOpts{}, sideOpts{})
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := a.m.Initiate(Target{IKE: "peer"}); err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for !matched(a.node, r.node, 1) {
			if time.Now().After(deadline) {
				b.Fatal("no IKE SA within 10 s")
			}
			time.Sleep(50 * time.Microsecond)
		}
		b.StopTimer()
		if err := a.m.Terminate(Target{IKE: "peer"}); err != nil {
			b.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			la, _ := a.m.List()
			lr, _ := r.m.List()
			in, _ := a.node.snapshot()
			if len(la) == 0 && len(lr) == 0 && len(in) == 0 { // the ended SAs' grace (2 s) included
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("not deleted within 10 s")
			}
		}
		b.StartTimer()
	}
}
