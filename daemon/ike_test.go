package daemon

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/ikenode"
	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/xfrmif"
)

// TestIKEMetrics: the ipsecd_ike_* series, through a pedantic registry:
// SAs by state (every state, 0 included), children, exchanges by type and
// result, retransmissions, authentication failures, drops by reason.
func TestIKEMetrics(t *testing.T) {
	sas := []control.IKESAInfo{{State: "ESTABLISHED", Children: make([]control.IKEChildInfo, 1)}, {State: "CONNECTING"}, {State: "ESTABLISHED"}}
	ctr := ikenode.Counters{
		Exchanges:    map[string][3]uint64{"IKE_SA_INIT": {4, 1, 0}, "IKE_AUTH": {3, 0, 1}},
		Retransmits:  2,
		AuthFailures: 1,
		QueueDrops:   5,
		Blocked:      195,
		HalfOpenFull: 35,
		EAP:          map[string][2]uint64{"EAP-MSCHAPv2": {7, 2}, "EAP-MD5": {0, 0}},
		EAPFailures:  map[string]uint64{"wrong_password": 1, "radius_timeout": 1, "unknown_user": 0},
	}
	src := metricsSource{
		counters:   func() []control.Counter { return nil },
		states:     func() []*sa.SA { return nil },
		interfaces: func() []*xfrmif.Interface { return nil },
		ike:        func() ([]control.IKESAInfo, ikenode.Counters, bool) { return sas, ctr, true },
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(newNodeCollector(src))
	out := scrapeMetrics(t, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), "/metrics")
	for _, line := range []string{
		`ipsecd_ike_sas{state="CONNECTING"} 1`,
		`ipsecd_ike_sas{state="DELETING"} 0`,
		`ipsecd_ike_sas{state="ESTABLISHED"} 2`,
		`ipsecd_ike_sas{state="REKEYED"} 0`,
		`ipsecd_ike_child_sas 1`,
		`ipsecd_ike_exchanges_total{exchange="IKE_AUTH",result="failed"} 1`,
		`ipsecd_ike_exchanges_total{exchange="IKE_SA_INIT",result="dropped"} 1`,
		`ipsecd_ike_exchanges_total{exchange="IKE_SA_INIT",result="ok"} 4`,
		`ipsecd_ike_retransmissions_total 2`,
		`ipsecd_ike_auth_failures_total 1`,
		`ipsecd_ike_dropped_total{reason="queue_full"} 5`,
		`ipsecd_ike_dropped_total{reason="block_threshold"} 195`,
		`ipsecd_ike_dropped_total{reason="init_limit_half_open"} 35`,
		`ipsecd_ike_dropped_total{reason="malformed"} 0`,
		`ipsecd_ike_eap_total{method="EAP-MSCHAPv2",result="succeeded"} 7`,
		`ipsecd_ike_eap_total{method="EAP-MSCHAPv2",result="failed"} 2`,
		`ipsecd_ike_eap_total{method="EAP-MD5",result="failed"} 0`,
		`ipsecd_ike_eap_failures_total{reason="wrong_password"} 1`,
		`ipsecd_ike_eap_failures_total{reason="radius_timeout"} 1`,
		`ipsecd_ike_eap_failures_total{reason="unknown_user"} 0`,
	} {
		if !strings.Contains(out, "\n"+line+"\n") {
			t.Errorf("no series %s in\n%s", line, out)
		}
	}
}

// TestIKEWithoutConnections: a daemon whose config has no connections
// answers the ike commands with control.ErrNoIKE, the one error (an
// ErrInvalid) that the control server also gives a backend without IKE.
func TestIKEWithoutConnections(t *testing.T) {
	b := (*backend)(&Daemon{})
	if _, err := b.IKEList(); !errors.Is(err, control.ErrNoIKE) || !errors.Is(err, control.ErrInvalid) {
		t.Errorf("ike list: %v, want ErrNoIKE", err)
	}
	for name, f := range map[string]func(control.IKETarget) error{"initiate": b.IKEInitiate, "terminate": b.IKETerminate, "rekey": b.IKERekey} {
		if err := f(control.IKETarget{IKE: "a"}); !errors.Is(err, control.ErrNoIKE) {
			t.Errorf("ike %s: %v, want ErrNoIKE", name, err)
		}
	}
}
