//go:build linux

package integration

import (
	"context"
	"debug/buildinfo"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/ipsecd/ipsecd/internal/promtest"
	"github.com/ipsecd/ipsecd/internal/syncbuf"
)

// httpGet is the http-get helper: it prints the body of a GET of url,
// retrying until the server answers (for up to 5 s). A request that asks
// for seconds=N (a pprof CPU profile) gets N seconds more to answer.
func httpGet(url string) error {
	timeout := 5 * time.Second
	if u, err := neturl.Parse(url); err == nil {
		if n, err := strconv.Atoi(u.Query().Get("seconds")); err == nil && n > 0 {
			timeout += time.Duration(n) * time.Second
		}
	}
	client := &http.Client{Timeout: timeout}
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var resp *http.Response
		resp, err = client.Get(url)
		if err != nil {
			continue
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		_, err = io.Copy(os.Stdout, resp.Body)
		return err
	}
	return err
}

// scrape fetches url from inside ns.
func scrape(t *testing.T, ns *netns, url string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := ns.cmd(ctx, self, url)
	cmd.Env = append(os.Environ(), helperEnv+"=http-get")
	var stderr syncbuf.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("GET %s in %s: %v\n%s", url, ns.name, err, stderr.String())
	}
	return string(out)
}

// labelNames returns the sorted label names of every series of f, once
// each set.
func labelNames(f *dto.MetricFamily) []string {
	seen := map[string]bool{}
	for _, m := range f.GetMetric() {
		var names []string
		for _, l := range m.GetLabel() {
			names = append(names, l.GetName())
		}
		sort.Strings(names)
		seen[strings.Join(names, ",")] = true
	}
	var out []string
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestMetrics runs A with two queues per interface and its metrics
// endpoint, sends ping both ways and a TCP stream from A to B, and from B
// two bad packets at A's underlay (an unknown SPI, and one for A's
// inbound SA whose ICV cannot verify). It scrapes A's /metrics in A's
// namespace and checks, with Prometheus's own text parser: every family of
// the contract with its labels and type, values that moved with the
// traffic, the bad packets in their xfrm and per-SA error counters, each
// interface's queues summing to its totals, every `ipsecd stats` counter
// present, the build info, the Go and process collectors, and no key.
func TestMetrics(t *testing.T) {
	spec := tunnelSpec{suite: suiteByName("chacha20-poly1305"), queues: 2, extraA: "metrics: 127.0.0.1:9578\n"}
	p := newPair(t)
	cfgA, cfgB := spec.configs()
	da := startDaemon(t, p.a, cfgA)
	startDaemon(t, p.b, cfgB)
	ping(t, p.a, innerB4, 3)
	ping(t, p.b, innerA4, 3)
	tcpTransfer(t, p.a, p.b, innerB4, 64<<10)

	// Bad packets: SPI 0xdeadbeef is no SA's; SPI 0x2001 is A's inbound
	// SA, and seq 1000 lies ahead in its window, so the ICV is checked
	// and fails (random bytes: 8-byte IV, 20 bytes ciphertext, 16 ICV).
	unknown := append([]byte{0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 1}, randomKey(44)...)
	forged := append([]byte{0, 0, 0x20, 0x01, 0, 0, 0x03, 0xe8}, randomKey(44)...)
	inject(t, p.b, false, underlayA4, unknown)
	inject(t, p.b, false, underlayA4, forged)

	out := []string{"spi", "0x1001", "dir", "out", "dst", underlayB4}
	in := []string{"spi", "0x2001", "dir", "in", "dst", underlayA4}
	integrity := promtest.Series("ipsecd_sa_errors_total", append(in, "kind", "integrity_failed")...)
	var body string
	var got map[string]float64
	var fams map[string]*dto.MetricFamily
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		body = scrape(t, p.a, "http://127.0.0.1:9578/metrics")
		got, fams = promtest.Samples(t, body)
		if got[integrity] >= 1 && got[promtest.Series("ipsecd_xfrm_stat_total", "counter", "XfrmInNoStates")] >= 1 || time.Now().After(deadline) {
			break
		}
	}
	defer func() {
		if t.Failed() {
			t.Logf("metrics:\n%s", body)
		}
	}()

	// Families: type, and the label names of every series.
	for name, tt := range map[string]struct {
		typ    dto.MetricType
		labels string
	}{
		"ipsecd_xfrm_stat_total":               {dto.MetricType_COUNTER, "counter"},
		"ipsecd_sa_bytes_total":                {dto.MetricType_COUNTER, "dir,dst,spi"},
		"ipsecd_sa_packets_total":              {dto.MetricType_COUNTER, "dir,dst,spi"},
		"ipsecd_sa_errors_total":               {dto.MetricType_COUNTER, "dir,dst,kind,spi"},
		"ipsecd_sa_expired":                    {dto.MetricType_GAUGE, "dir,dst,kind,spi"},
		"ipsecd_interface_packets_total":       {dto.MetricType_COUNTER, "dir,name"},
		"ipsecd_interface_bytes_total":         {dto.MetricType_COUNTER, "dir,name"},
		"ipsecd_interface_errors_total":        {dto.MetricType_COUNTER, "dir,name"},
		"ipsecd_interface_drops_total":         {dto.MetricType_COUNTER, "dir,name"},
		"ipsecd_interface_queue_packets_total": {dto.MetricType_COUNTER, "dir,name,queue"},
		"ipsecd_build_info":                    {dto.MetricType_GAUGE, "goversion,revision,version"},
	} {
		f := fams[name]
		if f == nil {
			t.Errorf("no family %s", name)
			continue
		}
		if f.GetType() != tt.typ {
			t.Errorf("%s is a %v, want %v", name, f.GetType(), tt.typ)
		}
		if ls := labelNames(f); len(ls) != 1 || ls[0] != tt.labels {
			t.Errorf("%s has labels %q, want [%s]", name, ls, tt.labels)
		}
	}
	for _, name := range []string{"go_goroutines", "go_memstats_alloc_bytes", "process_cpu_seconds_total", "process_resident_memory_bytes"} {
		if fams[name] == nil {
			t.Errorf("no family %s (Go and process collectors)", name)
		}
	}

	// Values that moved with the traffic.
	for _, s := range []string{
		promtest.Series("ipsecd_sa_bytes_total", out...), promtest.Series("ipsecd_sa_packets_total", out...),
		promtest.Series("ipsecd_sa_bytes_total", in...), promtest.Series("ipsecd_sa_packets_total", in...),
		promtest.Series("ipsecd_interface_packets_total", "name", "ipsec1", "dir", "rx"),
		promtest.Series("ipsecd_interface_packets_total", "name", "ipsec1", "dir", "tx"),
		promtest.Series("ipsecd_interface_bytes_total", "name", "ipsec1", "dir", "rx"),
		promtest.Series("ipsecd_interface_bytes_total", "name", "ipsec1", "dir", "tx"),
		promtest.Series("ipsecd_xfrm_stat_total", "counter", "IpsecdUnderlayRxPackets"),
		promtest.Series("ipsecd_xfrm_stat_total", "counter", "IpsecdUnderlayTxPackets"),
	} {
		if v, ok := got[s]; !ok || v == 0 {
			t.Errorf("%s = %v (present %v), want > 0 after ping and TCP", s, v, ok)
		}
	}
	// The TCP stream alone sealed 64 KiB on A's outbound SA.
	if v := got[promtest.Series("ipsecd_sa_bytes_total", out...)]; v < 64<<10 {
		t.Errorf("outbound SA bytes = %v, want at least the 65536 bytes of TCP sent", v)
	}
	// The bad packets, each counted once where it belongs.
	for s, want := range map[string]float64{
		promtest.Series("ipsecd_xfrm_stat_total", "counter", "XfrmInNoStates"):        1,
		promtest.Series("ipsecd_xfrm_stat_total", "counter", "XfrmInStateProtoError"): 1,
		integrity: 1,
		promtest.Series("ipsecd_sa_errors_total", append(in, "kind", "replay")...):            0,
		promtest.Series("ipsecd_sa_errors_total", append(in, "kind", "replay_window")...):     0,
		promtest.Series("ipsecd_sa_errors_total", append(out, "kind", "integrity_failed")...): 0,
		promtest.Series("ipsecd_sa_expired", append(in, "kind", "soft")...):                   0,
		promtest.Series("ipsecd_sa_expired", append(out, "kind", "hard")...):                  0,
	} {
		if v, ok := got[s]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", s, v, ok, want)
		}
	}

	// Each direction of the interface is the sum of its queues (one
	// reading per scrape), and there are as many queues as configured.
	for _, dir := range []string{"rx", "tx"} {
		var sum float64
		queues := 0
		for _, m := range fams["ipsecd_interface_queue_packets_total"].GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["name"] == "ipsec1" && l["dir"] == dir {
				sum += m.GetCounter().GetValue()
				queues++
			}
		}
		total := got[promtest.Series("ipsecd_interface_packets_total", "name", "ipsec1", "dir", dir)]
		if queues != spec.queues || sum != total {
			t.Errorf("ipsec1 %s: %d queues summing to %v packets, want %d summing to the interface's %v", dir, queues, sum, spec.queues, total)
		}
	}

	// Every counter of `ipsecd stats` (xfrm_stat and IpsecdUnderlay*).
	for name := range da.stats() {
		if _, ok := got[promtest.Series("ipsecd_xfrm_stat_total", "counter", name)]; !ok {
			t.Errorf("ipsecd stats counter %s is not in ipsecd_xfrm_stat_total", name)
		}
	}

	// Build info: 1, with what the binary's own build information says
	// (read here from the file, as `go version -m` does).
	bi, err := buildinfo.ReadFile(ipsecdBin)
	if err != nil {
		t.Fatalf("build info of %s: %v", ipsecdBin, err)
	}
	revision := "unknown" // -buildvcs=false, or not built in a checkout
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			revision = s.Value
		}
	}
	wantInfo := promtest.Series("ipsecd_build_info", "version", bi.Main.Version, "revision", revision, "goversion", bi.GoVersion)
	if v, ok := got[wantInfo]; !ok || v != 1 || len(fams["ipsecd_build_info"].GetMetric()) != 1 {
		t.Errorf("want exactly one %s 1", wantInfo)
	}

	// No key, whole or in part.
	lower := strings.ToLower(body)
	for _, k := range [][]byte{spec.keyAB, spec.keyBA} {
		if h := hex.EncodeToString(k); strings.Contains(lower, h[:16]) || strings.Contains(lower, h[len(h)-16:]) {
			t.Errorf("metrics expose key material")
		}
	}
}
