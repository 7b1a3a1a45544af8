//go:build linux

package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// swanctlLoadPools runs swanctl --load-pools against sock with
// swanctl.conf text conf; it returns the output and the error.
func swanctlLoadPools(t *testing.T, sock, conf string) (string, error) {
	return swanctlLoad(t, sock, "--load-pools", conf)
}

// swanctlLoad runs swanctl's load command (--load-all, --load-pools, ...)
// against sock with swanctl.conf text conf in a directory of its own.
func swanctlLoad(t *testing.T, sock, load, conf string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "swanctl.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("timeout", "30", "swanctl", load, "--file", path, "--uri", "unix://"+sock)
	cmd.Env = append(os.Environ(), "SWANCTL_DIR="+dir)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestViciLoadPools: the gateway's file names a pool it does not have
// (rw), which swanctl 5.9.8 --load-all loads over vici with alice's EAP
// password (the file has none for her); charon as a road warrior
// (EAP-MSCHAPv2) logs in as alice and gets 10.3.0.1 from it, which
// --list-pools --leases shows online under alice. While she is online,
// swanctl --load-pools with other addrs is refused, and so is the
// unload-pool of a swanctl.conf without the pool, as charon refuses
// them; once she is gone the pool unloads.
func TestViciLoadPools(t *testing.T) {
	filePools := "pools:\n  - {name: rw, addrs: 10.3.0.0/24, dns: [198.51.100.53], dns_domains: [corp.example]}\n"
	alice := "  - {type: eap, ids: [alice], secret: alice-mschapv2-pw}\n"
	rw, d, sock := viciRoadWarrior(t, func(gw string) string {
		if !strings.Contains(gw, filePools) || !strings.Contains(gw, alice) {
			t.Fatalf("raGateway changed; its pools are not\n%s\nor it has no\n%s", filePools, alice)
		}
		return strings.Replace(strings.Replace(gw, filePools, "", 1), alice, "", 1)
	})

	pools := "pools {\n  rw {\n    addrs = 10.3.0.0/24\n    dns = 198.51.100.53\n    25 = corp.example\n  }\n}\n"
	out, err := swanctlLoad(t, sock, "--load-all", pools+"secrets {\n  eap-alice {\n    id = alice\n    secret = alice-mschapv2-pw\n  }\n}\n")
	if err != nil || !strings.Contains(out, "loaded pool 'rw'") || !strings.Contains(out, "successfully loaded 1 pools, 0 unloaded") ||
		!strings.Contains(out, "loaded eap secret 'eap-alice'") {
		t.Fatalf("swanctl --load-all: %v\n%s", err, out)
	}
	rw.up(t, d, "connect", "alice", "10.3.0.1")
	out = viciSwanctl(t, sock, "--list-pools", "--leases")
	for _, want := range []string{"rw ", "10.3.0.0", "1 / 0 / 254", "10.3.0.1", "online", "'alice'"} {
		if !strings.Contains(out, want) {
			t.Errorf("swanctl --list-pools --leases: no %q in\n%s", want, out)
		}
	}
	t.Logf("swanctl --list-pools --leases:\n%s", out)

	// In use: other addrs, and unloading, are refused; the pool stays.
	out, err = swanctlLoadPools(t, sock, strings.Replace(pools, "10.3.0.0/24", "10.4.0.0/24", 1))
	if err == nil || !strings.Contains(out, "loading pool 'rw' failed: load-pool: rw: vici pool rw has 1 online leases, unable to replace") {
		t.Errorf("swanctl --load-pools, other addrs while alice is online: %v\n%s", err, out)
	}
	out, _ = swanctlLoadPools(t, sock, "")
	if !strings.Contains(out, "unloading pool 'rw' failed: unload-pool: rw has 1 online leases, unable to unload") || !strings.Contains(out, "0 unloaded") {
		t.Errorf("swanctl --load-pools without rw while alice is online:\n%s", out)
	}
	if out := viciSwanctl(t, sock, "--list-pools"); !strings.Contains(out, "1 / 0 / 254") {
		t.Errorf("swanctl --list-pools after the refusals:\n%s", out)
	}
	rw.down(t, d, "alice")
	out, err = swanctlLoadPools(t, sock, "")
	if err != nil || !strings.Contains(out, "no pools found, 1 unloaded") {
		t.Errorf("swanctl --load-pools without rw, alice gone: %v\n%s", err, out)
	}
	if out := viciSwanctl(t, sock, "--list-pools"); strings.Contains(out, "rw") {
		t.Errorf("swanctl --list-pools after unloading:\n%s", out)
	}
}
