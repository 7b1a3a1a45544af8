//go:build linux

package daemon

import (
	"bytes"
	"context"
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
	"github.com/ipsecd/ipsecd/tun/netnstest"
)

// TestMetricsExposureWarningLogged starts a node whose metrics (with
// pprof) listen on 192.0.2.1, an address of a veth pair inside a network
// namespace of the test's own (both ends: nothing leaves it): the daemon
// logs the warning, and serves both /metrics and the profiler there, as
// asked.
func TestMetricsExposureWarningLogged(t *testing.T) {
	ns := netnstest.New(t, "ipsecd-pprof")
	ns.IP(t, "link", "add", "v0", "type", "veth", "peer", "name", "v1")
	ns.IP(t, "addr", "add", "192.0.2.1/24", "dev", "v0")
	ns.IP(t, "link", "set", "v0", "up")
	ns.IP(t, "link", "set", "v1", "up")
	dir, err := os.MkdirTemp("", "ipsecd-pprof")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	cfg := &config.Config{
		File:     "test.yaml",
		Log:      config.Log{Level: "info", Format: "text"},
		Control:  filepath.Join(dir, "ipsecd.sock"),
		Metrics:  "192.0.2.1:0",
		Pprof:    true,
		Underlay: config.Underlay{UDP: netip.MustParseAddrPort("127.0.0.1:0")},
	}
	var logs bytes.Buffer
	log := logrus.New()
	log.SetOutput(&logs)
	var n *Daemon
	if err := ns.Do(func() (err error) { n, err = startNode(cfg, log); return err }); err != nil {
		t.Fatal(err)
	}
	defer n.stop()

	want := "metrics: listening on " + n.metricsAddr.String() + ", which is not a loopback address: whoever can reach it reads the SAs' SPIs, peer addresses and traffic counters and Go's profiler (pprof: true)"
	if !strings.Contains(logs.String(), want) || !strings.Contains(logs.String(), "level=warning") {
		t.Errorf("log lacks the warning %q:\n%s", want, logs.String())
	}

	// Connections are made inside the namespace, where 192.0.2.1 is.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (c net.Conn, err error) {
			err = ns.Do(func() error {
				var d net.Dialer
				c, err = d.DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
	}}
	for _, path := range []string{"/metrics", "/debug/pprof/"} {
		resp, err := client.Get("http://" + n.metricsAddr.String() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d, want 200", path, resp.StatusCode)
		}
	}
}
