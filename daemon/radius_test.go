package daemon

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/eapradius"
	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/xfrmif"
)

// TestRADIUSMetrics: each server's counters are ipsecd_radius_packets_total
// by server and kind, zeros included.
func TestRADIUSMetrics(t *testing.T) {
	src := metricsSource{
		counters:   func() []control.Counter { return nil },
		states:     func() []*sa.SA { return nil },
		interfaces: func() []*xfrmif.Interface { return nil },
		radius: func() []eapradius.ServerStats {
			return []eapradius.ServerStats{
				{Name: "dead", Requests: 4, Retransmits: 2, Timeouts: 2},
				{Name: "aaa", Requests: 9, Accepts: 3, Rejects: 1, Challenges: 5, Mismatches: 7},
			}
		},
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(newNodeCollector(src))
	out := scrapeMetrics(t, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), "/metrics")
	for _, line := range []string{
		`ipsecd_radius_packets_total{kind="timeout",server="dead"} 2`,
		`ipsecd_radius_packets_total{kind="retransmission",server="dead"} 2`,
		`ipsecd_radius_packets_total{kind="accept",server="aaa"} 3`,
		`ipsecd_radius_packets_total{kind="reject",server="aaa"} 1`,
		`ipsecd_radius_packets_total{kind="mismatch",server="aaa"} 7`,
		`ipsecd_radius_packets_total{kind="malformed",server="aaa"} 0`,
	} {
		if !strings.Contains(out, "\n"+line+"\n") {
			t.Errorf("no series %s in\n%s", line, out)
		}
	}
	if (&radiusKeeper{}).stats() != nil {
		t.Error("stats without a client")
	}
}
