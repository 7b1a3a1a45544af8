package integration

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// httpGet is the http-get helper: it prints the body of a GET of url,
// retrying until the server answers (for up to 5 s).
func httpGet(url string) error {
	client := &http.Client{Timeout: 5 * time.Second}
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
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("GET %s in %s: %v\n%s", url, ns.name, err, stderr.String())
	}
	return string(out)
}

// metric returns the value of the sample named exactly series (name and
// labels, as printed), and whether it is there.
func metric(body, series string) (uint64, bool) {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\d+)$`)
	m := re.FindStringSubmatch(body)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseUint(m[1], 10, 64)
	return v, err == nil
}

// TestMetrics scrapes A's Prometheus endpoint after traffic both ways.
func TestMetrics(t *testing.T) {
	spec := tunnelSpec{suite: suiteByName("chacha20-poly1305"), extraA: "metrics: 127.0.0.1:9578\n"}
	p := newPair(t)
	cfgA, cfgB := spec.configs()
	startDaemon(t, p.a, cfgA)
	startDaemon(t, p.b, cfgB)
	ping(t, p.a, innerB4, 3)
	ping(t, p.b, innerA4, 3)

	body := scrape(t, p.a, "http://127.0.0.1:9578/metrics")
	for _, tt := range []struct {
		series   string
		positive bool
	}{
		{`ipsecd_xfrm_stat_total{counter="XfrmInNoStates"}`, false},
		{`ipsecd_xfrm_stat_total{counter="XfrmOutNoStates"}`, false},
		{`ipsecd_sa_bytes_total{spi="0x1001",dir="out"}`, true},
		{`ipsecd_sa_packets_total{spi="0x1001",dir="out"}`, true},
		{`ipsecd_sa_bytes_total{spi="0x2001",dir="in"}`, true},
		{`ipsecd_interface_packets_total{name="ipsec1",dir="rx"}`, true},
		{`ipsecd_interface_packets_total{name="ipsec1",dir="tx"}`, true},
		{`ipsecd_interface_bytes_total{name="ipsec1",dir="rx"}`, true},
	} {
		v, ok := metric(body, tt.series)
		switch {
		case !ok:
			t.Errorf("no sample %s", tt.series)
		case tt.positive && v == 0:
			t.Errorf("%s = 0, want > 0 after traffic", tt.series)
		}
	}
	if !strings.Contains(body, "# TYPE ipsecd_xfrm_stat_total counter") {
		t.Errorf("no TYPE line for ipsecd_xfrm_stat_total")
	}
	for _, k := range [][]byte{spec.keyAB, spec.keyBA} {
		if h := hex.EncodeToString(k); strings.Contains(body, h) || strings.Contains(body, h[:16]) {
			t.Errorf("metrics expose key material")
		}
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", body)
	}
}
