package daemon

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/control"
)

// startWithPools starts a daemon (no interfaces, so no TUN) with pools
// in dir, its state_dir dir/state.
func startWithPools(t *testing.T, dir, pools string) (*Daemon, *control.Client) {
	t.Helper()
	u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	udp := u.LocalAddr().String()
	u.Close()
	sock := filepath.Join(dir, "ipsecd.sock")
	path := filepath.Join(dir, "ipsecd.yaml")
	file := "control: " + sock + "\nstate_dir: " + filepath.Join(dir, "state") + "\nunderlay: {udp: " + udp + "}\n" + pools
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	d, err := Start(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	c, err := control.Dial(sock)
	if err != nil {
		d.Stop()
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return d, c
}

const twoPools = "pools:\n  - {name: rw, addrs: 10.3.0.0/24}\n  - {name: rw6, addrs: \"fd00:3::/120\"}\n"

// TestPoolLeasesSurviveRestart: leases made by one run are listed over
// the control socket and in the metrics, saved at stop, and the next run
// gives each identity its address back; pool list without pools is
// ErrNoPools.
func TestPoolLeasesSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	d, c := startWithPools(t, dir, twoPools)
	set := d.pools.pools()
	peer := netip.MustParseAddrPort("198.51.100.7:4500")
	want := map[string]netip.Addr{}
	for i := range 3 {
		id := fmt.Sprintf("user%d@example.net", i)
		want[id], _, _ = set.Acquire([]string{"rw", "rw6"}, id, netip.IPv4Unspecified(), peer)
	}
	set.Release("rw", "user1@example.net", want["user1@example.net"])

	pools, err := c.PoolList(true)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(pools)
	if w := "[{rw 10.3.0.0/24 254 2 1 [{10.3.0.1 user0@example.net online} {10.3.0.2 user1@example.net offline} {10.3.0.3 user2@example.net online}]} {rw6 fd00:3::/120 254 0 0 []}]"; got != w {
		t.Errorf("pool list --leases:\n got %s\nwant %s", got, w)
	}
	if pools, _ := c.PoolList(false); pools[0].Leases != nil {
		t.Errorf("pool list without --leases listed leases: %v", pools[0].Leases)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(newNodeCollector(nodeMetricsSource(d)))
	out := scrapeMetrics(t, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), "/metrics")
	for _, line := range []string{
		`ipsecd_pool_addresses{pool="rw",state="online"} 2`,
		`ipsecd_pool_addresses{pool="rw",state="offline"} 1`,
		`ipsecd_pool_addresses{pool="rw",state="free"} 251`,
		`ipsecd_pool_addresses{pool="rw6",state="free"} 254`,
	} {
		if !strings.Contains(out, "\n"+line+"\n") {
			t.Errorf("no series %s in\n%s", line, out)
		}
	}
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}

	d, c = startWithPools(t, dir, twoPools)
	defer d.Stop()
	pools, err = c.PoolList(false)
	if err != nil || pools[0].Online != 0 || pools[0].Offline != 3 {
		t.Fatalf("after the restart: %+v, %v; want rw with 3 offline leases", pools, err)
	}
	for _, id := range []string{"user2@example.net", "user1@example.net", "user0@example.net"} {
		if a, _, _ := d.pools.pools().Acquire([]string{"rw"}, id, netip.IPv4Unspecified(), peer); a != want[id] {
			t.Errorf("%s got %s after the restart, want %s", id, a, want[id])
		}
	}
}

func TestPoolListWithoutPools(t *testing.T) {
	d, c := startWithPools(t, t.TempDir(), "")
	defer d.Stop()
	if _, err := c.PoolList(false); !errors.Is(err, control.ErrInvalid) || !strings.Contains(err.Error(), "no address pools") {
		t.Errorf("pool list without pools: %v, want ErrNoPools", err)
	}
}
