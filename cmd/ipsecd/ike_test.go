package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/control/controltest"
	"github.com/ipsecd/ipsecd/ikenode"
	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/xfrmif"
)

// TestIKEMetrics: the ipsecd_ike_* series, through a pedantic registry:
// SAs by state (every state, 0 included), children, exchanges by type and
// result, retransmissions, authentication failures, drops by reason.
func TestIKEMetrics(t *testing.T) {
	sas := []ikenode.SAInfo{{State: "ESTABLISHED", Children: make([]ikenode.ChildInfo, 1)}, {State: "CONNECTING"}, {State: "ESTABLISHED"}}
	ctr := ikenode.Counters{
		Exchanges:    map[string][3]uint64{"IKE_SA_INIT": {4, 1, 0}, "IKE_AUTH": {3, 0, 1}},
		Retransmits:  2,
		AuthFailures: 1,
		QueueDrops:   5,
		Blocked:      195,
		HalfOpenFull: 35,
	}
	src := metricsSource{
		counters:   func() []control.Counter { return nil },
		states:     func() []*sa.SA { return nil },
		interfaces: func() []*xfrmif.Interface { return nil },
		ike:        func() ([]ikenode.SAInfo, ikenode.Counters, bool) { return sas, ctr, true },
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
	} {
		if !strings.Contains(out, "\n"+line+"\n") {
			t.Errorf("no series %s in\n%s", line, out)
		}
	}
}

// TestIKECommandErrors: the ike commands' usage errors (exit 2), and a
// daemon without IKE answers that it runs none (exit 1).
func TestIKECommandErrors(t *testing.T) {
	srv := controltest.Start(t, &controltest.Backend{})
	for _, tt := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"ike"}, 2, "want ipsecd ike list|initiate|terminate|rekey"},
		{[]string{"ike", "fly"}, 2, `unknown ike command "fly"`},
		{[]string{"ike", "initiate", "--control", srv.Path()}, 2, "want one of --ike NAME and --child NAME"},
		{[]string{"ike", "rekey", "--ike", "a", "--child", "b", "--control", srv.Path()}, 2, "want one of --ike NAME and --child NAME"},
		{[]string{"ike", "list", "--control", srv.Path()}, 1, "IKE is not running"},
		{[]string{"ike", "terminate", "--ike", "a", "--control", srv.Path()}, 1, "IKE is not running"},
	} {
		var o, e bytes.Buffer
		if code := run(tt.args, &o, &e); code != tt.code || !strings.Contains(o.String()+e.String(), tt.out) {
			t.Errorf("ipsecd %q: exit %d, output %q; want %d and %q", tt.args, code, o.String()+e.String(), tt.code, tt.out)
		}
	}
}

// TestIKEListEscapes: what a peer chose (its identity, here a terminal
// escape and a CR LF that would fake a line) is printed escaped by ike
// list, even from a daemon that sent it raw; JSON escapes it by itself.
func TestIKEListEscapes(t *testing.T) {
	const evil = "\x1b[2J\r\nfake"
	var o bytes.Buffer
	writeIKESAs(&o, []ikenode.SAInfo{{Name: "rw", State: "ESTABLISHED", LocalID: "b.test", RemoteID: evil,
		Children: []ikenode.ChildInfo{{Name: "net", State: "INSTALLED", LocalTS: []string{evil}}}}})
	out := o.String()
	if strings.ContainsAny(out, "\x1b\r") || strings.Contains(out, "\nfake") {
		t.Errorf("ike list printed the peer's control characters:\n%q", out)
	}
	if !strings.Contains(out, `  remote '\x1b[2J\x0d\x0afake' @`) {
		t.Errorf("ike list does not show the peer's identity escaped:\n%s", out)
	}
	if n := strings.Count(out, "\n"); n != 11 {
		t.Errorf("ike list printed %d lines, want 11:\n%s", n, out)
	}
}
