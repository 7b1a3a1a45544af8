//go:build linux

package integration

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/internal/syncbuf"
)

// TestSystemdUnitPrivileges runs the daemon with exactly the privileges
// deploy/systemd/ipsecd.service gives it (an unprivileged user, the unit's
// ambient capabilities and bounding set, no_new_privs), as systemd would
// start it, and passes ping through a raw ESP tunnel, which needs both
// capabilities. There is no systemd to start the unit itself here: go test
// ./deploy checks the rest of it with systemd-analyze.
func TestSystemdUnitPrivileges(t *testing.T) {
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("skipping: setpriv not found (Debian util-linux; scripts/test.sh installs it)")
	}
	unit := unitSettings(t, "../deploy/systemd/ipsecd.service")
	ambient := setprivCaps(t, unit["AmbientCapabilities"])
	bounding := setprivCaps(t, unit["CapabilityBoundingSet"])
	if unit["NoNewPrivileges"] != "yes" {
		t.Fatalf("the unit's NoNewPrivileges=%q; this test runs it as yes", unit["NoNewPrivileges"])
	}
	const nobody = 65534 // a user with no capability and no file of its own

	spec := tunnelSpec{suite: suiteByName("chacha20-poly1305"), raw: true}
	cfgA, cfgB := spec.configs()
	p := newPair(t)
	startDaemon(t, p.b, cfgB)

	// The binary and A's config where the user can read them (the test
	// binary's own directories are root's, 0700), the config 0600 as the
	// unit's README asks.
	dir, err := os.MkdirTemp("", "ipsecd-unit-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin, cfg, sock := filepath.Join(dir, "ipsecd"), filepath.Join(dir, "ipsecd.yaml"), filepath.Join(dir, "ipsecd.sock")
	data, err := os.ReadFile(ipsecdBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	// The state directory is the user's own, as StateDirectory= makes
	// it (seqstate refuses one that another user owns).
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("control: "+sock+"\n"+cfgA+"\nstate_dir: "+state+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{dir, cfg, state} {
		if err := os.Chown(f, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}

	// ip netns exec and setpriv exec in turn: the process is the daemon.
	args := []string{"netns", "exec", p.a.name, "setpriv",
		"--reuid", strconv.Itoa(nobody), "--regid", strconv.Itoa(nobody), "--clear-groups",
		"--inh-caps", ambient, "--ambient-caps", ambient, "--bounding-set", "-all," + bounding,
		"--no-new-privs", bin, "run", "--config", cfg}
	cmd := exec.Command("ip", args...)
	log := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("ipsecd as the unit runs it:\n%s", log.String())
		}
	})
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if exec.Command(bin, "health", "--control", sock, "--timeout", "1s").Run() == nil {
			break
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("ipsecd exited during start-up with the unit's privileges: %v\n%s", err, log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("ipsecd did not answer within 15 s\n%s", log.String())
		}
	}

	st := procStatus(t, fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if uid := strings.Fields(st["Uid"]); len(uid) == 0 || uid[0] != strconv.Itoa(nobody) {
		t.Errorf("daemon uid %q, want %d", st["Uid"], nobody)
	}
	if st["CapEff"] != fmt.Sprintf("%016x", capNetAdmin|capNetRaw) || st["NoNewPrivs"] != "1" {
		t.Errorf("daemon CapEff %s NoNewPrivs %s, want %016x and 1", st["CapEff"], st["NoNewPrivs"], capNetAdmin|capNetRaw)
	}
	ping(t, p.a, innerB4, 3)
	ping(t, p.b, innerA4, 3)
}

// unitSettings reads the [Service] section of a unit file into key →
// value (the last one of a repeated key).
func unitSettings(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := map[string]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			section = line
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok && section == "[Service]" && !strings.HasPrefix(line, "#") {
			m[k] = v
		}
	}
	return m
}

// setprivCaps turns "CAP_NET_ADMIN CAP_NET_RAW" into setpriv's
// "+net_admin,+net_raw".
func setprivCaps(t *testing.T, list string) string {
	t.Helper()
	var out []string
	for _, c := range strings.Fields(list) {
		name, ok := strings.CutPrefix(c, "CAP_")
		if !ok {
			t.Fatalf("capability %q: want CAP_NAME", c)
		}
		out = append(out, "+"+strings.ToLower(name))
	}
	if len(out) == 0 {
		t.Fatal("the unit grants no capability")
	}
	return strings.Join(out, ",")
}
