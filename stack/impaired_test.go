package stack

import (
	"net/netip"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/underlay/underlaytest"
)

// TestImpairedUnderlay puts a relay that loses and reorders datagrams
// between the two netstacks, one per direction. TCP must still deliver
// every byte (checksummed). Reordering within the replay window must cost
// no packet (XfrmInStateSeqError stays 0); reordering beyond it must be
// counted (the SA's replay-window drops and XfrmInStateSeqError grow) and
// TCP recovers by retransmission.
func TestImpairedUnderlay(t *testing.T) {
	tests := []struct {
		name    string
		window  uint32
		imp     underlaytest.Impairment
		seqErrs bool // XfrmInStateSeqError expected
	}{
		{"loss-and-reorder-within-window", 64, underlaytest.Impairment{Loss: 0.01, Reorder: 0.02, Distance: 40}, false},
		{"reorder-beyond-window", 32, underlaytest.Impairment{Reorder: 0.005, Distance: 100}, true},
	}
	size := int64(16 << 20)
	if testing.Short() {
		size = 4 << 20 // still some 3,000 datagrams each way, 15 reordered
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var relays [2]*underlaytest.Relay
			spec := pairSpec{
				suite: suites[0], mode: sa.ModeTunnel, outer: lo4, inner: doc4, window: tt.window,
				via: func(i int, peer netip.AddrPort) netip.AddrPort {
					imp := tt.imp
					imp.Seed = uint64(i + 1)
					r, err := underlaytest.New(netip.AddrPortFrom(peer.Addr(), 0), peer, imp)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { r.Close() })
					relays[i] = r
					return r.Addr()
				},
			}
			p := startPair(t, spec)
			start := time.Now()
			exchangeTCP(t, p, size, 180*time.Second)
			el := time.Since(start)

			var held uint64
			for i, r := range relays {
				st := r.Stats()
				t.Logf("relay %d: %+v", i, st)
				if tt.imp.Loss > 0 && st.Dropped == 0 {
					t.Errorf("relay %d dropped nothing: the test tested no loss", i)
				}
				held += st.Reordered + st.Expired
				if st.Reordered == 0 {
					t.Errorf("relay %d reordered nothing: the test tested no reordering", i)
				}
			}
			for i, n := range p.nets {
				seqErrs := n.Counters().Get(sa.XfrmInStateSeqError)
				in := p.in[i].Stats()
				t.Logf("side %d: XfrmInStateSeqError %d, SA replay-window %d, replay %d", i, seqErrs, in.ReplayWindow, in.Replay)
				switch {
				case !tt.seqErrs && seqErrs != 0:
					t.Errorf("side %d: XfrmInStateSeqError = %d for reordering within the window, want 0", i, seqErrs)
				case tt.seqErrs && (seqErrs == 0 || in.ReplayWindow == 0):
					t.Errorf("side %d: XfrmInStateSeqError = %d, SA replay-window = %d for reordering beyond the window, want both > 0", i, seqErrs, in.ReplayWindow)
				}
			}
			t.Logf("TCP %d MiB each way in %v over the impaired underlay (%d datagrams reordered)", size>>20, el.Round(time.Millisecond), held)
		})
	}
}
