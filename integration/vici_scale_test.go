//go:build linux

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// viciConnsEnv, when set to a count, makes TestViciLoadConnsScale load
// that many connections (a measurement for docs/benchmark.md, not a CI
// check; it skips otherwise).
const viciConnsEnv = "IPSECD_VICI_CONNS"

// viciManyConns is swanctl.conf with n PSK connections, each its own peer
// address, identity and child, none started, and one secret for all.
func viciManyConns(n int) string {
	var b strings.Builder
	b.WriteString("connections {\n")
	for i := range n {
		fmt.Fprintf(&b, `  p%d {
    remote_addrs = 10.9.%d.%d
    proposals = aes256-sha256-x25519
    local {
      auth = psk
      id = a.test
    }
    remote {
      auth = psk
      id = b%d.test
    }
    children {
      net%d {
        local_ts = 198.51.100.0/24
        remote_ts = 10.2.%d.%d/32
        esp_proposals = aes128gcm16
        if_id_in = 1
        if_id_out = 1
      }
    }
  }
`, i, i>>8, i&0xff, i, i, i>>8, i&0xff)
	}
	b.WriteString("}\nsecrets {\n  ike-all {\n    id = a.test\n    secret = 0x6d79207475726e656c207365637265742c206e6f7420666f7220757365\n  }\n}\n")
	return b.String()
}

// TestViciLoadConnsScale: swanctl 5.9.8 --load-conns of IPSECD_VICI_CONNS
// connections into the real binary (a load-conn message each, one after
// the other), then again unchanged; it logs how long each took and how
// the last tenth compared with the first (with a cost per load-conn that
// grows with the connections loaded, the load is quadratic).
func TestViciLoadConnsScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv(viciConnsEnv))
	if n <= 0 {
		t.Skipf("a measurement: set %s=N to load N connections over vici", viciConnsEnv)
	}
	p := newPair(t)
	sock := filepath.Join(t.TempDir(), "charon.vici")
	d := startDaemon(t, p.a, fmt.Sprintf(`vici: %s
underlay: {udp: "0.0.0.0:4500"}
interfaces:
  - {name: ipsec1, if_id: 1, addresses: [198.51.100.1/24]}
`, sock))
	dir := t.TempDir()
	path := filepath.Join(dir, "swanctl.conf")
	if err := os.WriteFile(path, []byte(viciManyConns(n)), 0o600); err != nil {
		t.Fatal(err)
	}
	swanctl := func(what, want string) time.Duration {
		t.Helper()
		start := time.Now()
		cmd := exec.Command("timeout", "600", "swanctl", what, "--file", path, "--uri", "unix://"+sock)
		cmd.Env = append(os.Environ(), "SWANCTL_DIR="+dir)
		out, err := cmd.CombinedOutput()
		took := time.Since(start)
		if err != nil || !strings.Contains(string(out), want) {
			t.Fatalf("swanctl %s: %v\n%s", what, err, out)
		}
		return took
	}
	swanctl("--load-creds", "loaded ike secret 'ike-all'")
	load := func() time.Duration {
		return swanctl("--load-conns", fmt.Sprintf("successfully loaded %d connections, 0 unloaded", n))
	}
	first := load()
	again := load()
	if got := strings.Count(viciSwanctl(t, sock, "--list-conns"), ": IKEv2"); got != n {
		t.Fatalf("--list-conns lists %d connections, want %d", got, n)
	}
	_ = d
	t.Logf("swanctl --load-conns of %d connections: %.2f s (%.2f ms each); again, unchanged: %.2f s",
		n, first.Seconds(), first.Seconds()*1000/float64(n), again.Seconds())
}
