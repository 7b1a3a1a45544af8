package daemon

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/config"
)

// TestMetricsPprofOptIn starts a node with a metrics listener on
// loopback, without and with pprof: true, and asks the real listener for
// /metrics and /debug/pprof/: the profiler answers 404 unless the config
// asks for it. Loopback draws no exposure warning.
func TestMetricsPprofOptIn(t *testing.T) {
	for _, tt := range []struct {
		pprof bool
		want  int
	}{
		{false, http.StatusNotFound},
		{true, http.StatusOK},
	} {
		t.Run(map[bool]string{false: "default", true: "pprof"}[tt.pprof], func(t *testing.T) {
			dir, err := os.MkdirTemp("", "ipsecd-pprof")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(dir)
			cfg := &config.Config{
				File:     "test.yaml",
				Log:      config.Log{Level: "info", Format: "text"},
				Control:  filepath.Join(dir, "ipsecd.sock"),
				Metrics:  "127.0.0.1:0",
				Pprof:    tt.pprof,
				Underlay: config.Underlay{UDP: netip.MustParseAddrPort("127.0.0.1:0")},
			}
			var logs bytes.Buffer
			log := logrus.New()
			log.SetOutput(&logs)
			n, err := startNode(cfg, log)
			if err != nil {
				t.Fatal(err)
			}
			defer n.stop()

			client := &http.Client{Timeout: 10 * time.Second}
			get := func(path string) (int, string) {
				t.Helper()
				resp, err := client.Get("http://" + n.metricsAddr.String() + path)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(body)
			}
			if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, "ipsecd_build_info") {
				t.Errorf("GET /metrics: %d, want 200 with the metrics", code)
			}
			for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline"} {
				if code, _ := get(path); code != tt.want {
					t.Errorf("pprof %v: GET %s: %d, want %d", tt.pprof, path, code, tt.want)
				}
			}
			if strings.Contains(logs.String(), "not a loopback") || strings.Contains(logs.String(), "every address") {
				t.Errorf("a loopback listener drew the exposure warning:\n%s", logs.String())
			}
		})
	}
}

// TestMetricsExposureWarning: the daemon warns when the metrics listener
// is bound to an address other hosts may reach (any address, or a
// non-loopback one), and names the profiler when it is on. This checks the
// logic on the bound address, without listening off loopback.
func TestMetricsExposureWarning(t *testing.T) {
	for _, tt := range []struct {
		addr  string
		pprof bool
		want  string // "" for no warning
	}{
		{"127.0.0.1:9578", true, ""},
		{"127.0.0.2:9578", true, ""},
		{"[::1]:9578", true, ""},
		{"[::ffff:127.0.0.1]:9578", false, ""},
		{"0.0.0.0:9578", false, "metrics: listening on 0.0.0.0:9578, every address of the host: whoever can reach it reads the SAs' SPIs, peer addresses and traffic counters; listen on 127.0.0.1 or ::1, or firewall the port"},
		{"[::]:9578", true, "metrics: listening on [::]:9578, every address of the host: whoever can reach it reads the SAs' SPIs, peer addresses and traffic counters and Go's profiler (pprof: true); listen on 127.0.0.1 or ::1, or firewall the port"},
		{"192.0.2.1:9578", false, "metrics: listening on 192.0.2.1:9578, which is not a loopback address: whoever can reach it reads the SAs' SPIs, peer addresses and traffic counters; listen on 127.0.0.1 or ::1, or firewall the port"},
		{"[2001:db8::1]:9578", true, "metrics: listening on [2001:db8::1]:9578, which is not a loopback address: whoever can reach it reads the SAs' SPIs, peer addresses and traffic counters and Go's profiler (pprof: true); listen on 127.0.0.1 or ::1, or firewall the port"},
	} {
		addr := net.TCPAddrFromAddrPort(netip.MustParseAddrPort(tt.addr))
		if got := metricsExposureWarning(addr, tt.pprof); got != tt.want {
			t.Errorf("%s (pprof %v):\n got %q\nwant %q", tt.addr, tt.pprof, got, tt.want)
		}
	}
}
