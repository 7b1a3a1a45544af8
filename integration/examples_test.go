//go:build linux

package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestTwoNamespacesScript follows docs/operations.md's example as a user would:
// examples/two-namespaces.sh up, the two daemons exactly as it prints
// them, ping through the tunnel both ways as it prints, then down, after
// which nothing it made is left: no namespace, no process, no key, no
// config copy, no control socket.
func TestTwoNamespacesScript(t *testing.T) {
	// Names of this run's own, so as not to meet the user's ipsecd-a and
	// ipsecd-b; the defaults are what docs/operations.md shows (checked below).
	nsA, nsB, dir, script := exampleScript(t, "two-namespaces.sh", "ex")

	out, err := script("up", dir)
	if err != nil {
		t.Fatalf("two-namespaces.sh up: %v\n%s", err, out)
	}
	t.Logf("two-namespaces.sh up:\n%s", out)
	for _, k := range []string{"keys/a-to-b.key", "keys/b-to-a.key"} {
		fi, err := os.Stat(filepath.Join(dir, k))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want a key file with mode 0600", k, err, fi.Mode())
		}
	}

	// The commands it printed: two daemons to start, pings to run.
	var daemons, pings [][]string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) > 5 && slices.Equal(f[:3], []string{"ip", "netns", "exec"}) && f[5] == "run":
			daemons = append(daemons, f)
		case len(f) > 4 && slices.Equal(f[:3], []string{"ip", "netns", "exec"}) && f[4] == "ping":
			pings = append(pings, f)
		}
	}
	if len(daemons) != 2 || len(pings) != 2 {
		t.Fatalf("up printed %d daemon and %d ping commands, want 2 and 2:\n%s", len(daemons), len(pings), out)
	}
	var procs []*exec.Cmd
	for _, d := range daemons {
		if d[3] != nsA && d[3] != nsB {
			t.Fatalf("printed %q: want it in %s or %s", d, nsA, nsB)
		}
		cmd := exec.Command(d[0], d[1:]...)
		logFile, err := os.Create(filepath.Join(t.TempDir(), d[3]+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logFile, logFile
		if err := cmd.Start(); err != nil {
			t.Fatalf("%q: %v", d, err)
		}
		procs = append(procs, cmd)
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
			if t.Failed() {
				log, _ := os.ReadFile(logFile.Name())
				t.Logf("%s:\n%s", strings.Join(d, " "), log)
			}
		})
	}
	for _, cfg := range []string{"host-a.yaml", "host-b.yaml"} {
		waitHealthy(t, filepath.Join(dir, cfg))
	}
	for _, p := range pings {
		// -W bounds each reply's wait; -c 3 from the script bounds the count.
		args := slices.Insert(slices.Clone(p[5:]), 0, "-W", "2")
		if out, err := exec.Command("ip", append([]string{"netns", "exec", p[3], "ping"}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(p, " "), err, out)
		}
	}
	// Each daemon keeps its keys' sequence records beside its config
	// (state_dir: state/host-a), where down removes them with the keys.
	for _, host := range []string{"host-a", "host-b"} {
		if entries, err := os.ReadDir(filepath.Join(dir, "state", host)); err != nil || len(entries) == 0 {
			t.Errorf("%s's sequence records in %s: %v, %d entries", host, filepath.Join(dir, "state", host), err, len(entries))
		}
	}
	sockets := []string{"/run/ipsecd/host-a.sock", "/run/ipsecd/host-b.sock"}
	for _, s := range sockets {
		if _, err := os.Stat(s); err != nil {
			t.Errorf("control socket %s: %v (the examples' control key)", s, err)
		}
	}

	// down stops the daemons (SIGTERM: they exit 0) and leaves nothing.
	if out, err := script("down", dir); err != nil {
		t.Fatalf("two-namespaces.sh down: %v\n%s", err, out)
	}
	for _, p := range procs {
		done := make(chan error, 1)
		go func() { done <- p.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s after down: %v, want exit 0 (SIGTERM stops it cleanly)", strings.Join(p.Args, " "), err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("%s still runs 10 s after down", strings.Join(p.Args, " "))
		}
	}
	if list, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(list), nsA) || strings.Contains(string(list), nsB) {
		t.Errorf("namespaces left after down:\n%s", list)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		entries, _ := filepath.Glob(filepath.Join(dir, "*"))
		t.Errorf("%s left after down (%v): %v", dir, err, entries)
	}
	for _, s := range sockets {
		if _, err := os.Stat(s); !os.IsNotExist(err) {
			t.Errorf("control socket %s left after down: %v", s, err)
		}
	}

	// The names docs/operations.md shows are the script's defaults.
	page, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("../examples/two-namespaces.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ns_a=${NS_A:-ipsecd-a}", "ns_b=${NS_B:-ipsecd-b}"} {
		if !strings.Contains(string(src), want) {
			t.Errorf("two-namespaces.sh lacks %q", want)
		}
	}
	for _, want := range []string{"examples/two-namespaces.sh up", "ip netns exec ipsecd-a ./ipsecd run --config examples/host-a.yaml", "ip netns exec ipsecd-b ./ipsecd run --config examples/host-b.yaml"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("docs/operations.md lacks %q (what two-namespaces.sh prints)", want)
		}
	}
}

// waitHealthy waits up to 20 s for ipsecd health --config cfg to pass.
func waitHealthy(t *testing.T, cfg string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := exec.Command(ipsecdBin, "health", "--config", cfg, "--timeout", "1s").CombinedOutput()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ipsecd health --config %s: still failing after 20 s: %v\n%s", cfg, err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestIKETwoNamespacesScript follows the README's IKE example as a user
// would: examples/ike-two-namespaces.sh up, which starts both daemons and
// waits for the IKE SA; the pings it prints, both ways, then the child
// rekey it prints and a ping over the new SAs; then down, after which
// nothing it made is left: no namespace, no daemon, no key, no log, no
// config copy, no control socket.
func TestIKETwoNamespacesScript(t *testing.T) {
	nsA, nsB, dir, script := exampleScript(t, "ike-two-namespaces.sh", "ike")

	out, err := script("up", dir)
	if err != nil {
		t.Fatalf("ike-two-namespaces.sh up: %v\n%s", err, out)
	}
	t.Logf("ike-two-namespaces.sh up:\n%s", out)
	if fi, err := os.Stat(filepath.Join(dir, "keys/ike.psk")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("keys/ike.psk: %v, mode %v; want a key file with mode 0600", err, fi.Mode())
	}
	for _, want := range []string{"site-b: ESTABLISHED, IKEv2", "net: INSTALLED, TUNNEL, ESP-in-UDP", "aes128gcm16-prfsha256-x25519"} {
		if !strings.Contains(out, want) {
			t.Errorf("up's ike list lacks %q", want)
		}
	}
	// The daemons it started, one in each namespace.
	var pids []string
	for _, ns := range []string{nsA, nsB} {
		p, err := exec.Command("ip", "netns", "pids", ns).Output()
		if err != nil || len(strings.Fields(string(p))) != 1 {
			t.Fatalf("ip netns pids %s: %v %q, want one daemon", ns, err, p)
		}
		pids = append(pids, strings.TrimSpace(string(p)))
	}

	// The commands it printed: pings to run, a child rekey.
	var pings [][]string
	var rekey []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) > 4 && slices.Equal(f[:3], []string{"ip", "netns", "exec"}) && f[4] == "ping":
			pings = append(pings, f)
		case len(f) > 4 && f[0] == ipsecdBin && slices.Equal(f[1:5], []string{"ike", "rekey", "--child", "net"}):
			rekey = f
		}
	}
	if len(pings) != 2 || rekey == nil {
		t.Fatalf("up printed %d ping commands and rekey %q, want 2 and one:\n%s", len(pings), rekey, out)
	}
	ping := func(p []string) {
		t.Helper()
		// -W bounds each reply's wait; -c 3 from the script bounds the count.
		args := slices.Insert(slices.Clone(p[5:]), 0, "-W", "2")
		if out, err := exec.Command("ip", append([]string{"netns", "exec", p[3], "ping"}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(p, " "), err, out)
		}
	}
	for _, p := range pings {
		ping(p)
	}
	listA := func() string {
		out, err := exec.Command(ipsecdBin, "ike", "list", "--config", filepath.Join(dir, "ike-a.yaml")).CombinedOutput()
		if err != nil {
			t.Fatalf("ipsecd ike list: %v\n%s", err, out)
		}
		return string(out)
	}
	before := listA()
	if out, err := exec.Command(rekey[0], rekey[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(rekey, " "), err, out)
	}
	spis := regexp.MustCompile(`SPIs: (\S+) (\S+)`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		now := listA()
		if m := spis.FindAllString(now, -1); len(m) == 1 && m[0] != spis.FindString(before) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the rekey, ike list at A:\n%s\nbefore:\n%s", now, before)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ping(pings[0])

	// down stops the daemons and leaves nothing.
	if out, err := script("down", dir); err != nil {
		t.Fatalf("ike-two-namespaces.sh down: %v\n%s", err, out)
	}
	// The daemons are no children of ours: once ended they may stay a
	// moment as zombies, until init reaps them.
	for _, pid := range pids {
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if f := strings.Fields(string(stat)); err == nil && len(f) > 2 && f[2] != "Z" {
			t.Errorf("daemon %s still runs after down: %s", pid, stat)
		}
	}
	if list, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(list), nsA) || strings.Contains(string(list), nsB) {
		t.Errorf("namespaces left after down:\n%s", list)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		entries, _ := filepath.Glob(filepath.Join(dir, "*"))
		t.Errorf("%s left after down (%v): %v", dir, err, entries)
	}
	for _, s := range []string{"/run/ipsecd/ike-a.sock", "/run/ipsecd/ike-b.sock"} {
		if _, err := os.Stat(s); !os.IsNotExist(err) {
			t.Errorf("control socket %s left after down: %v", s, err)
		}
	}

	// The README shows the script with its default names.
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"examples/ike-two-namespaces.sh up", "ip netns exec ipsecd-ike-a ping -c 3 10.20.0.1", "examples/ike-two-namespaces.sh down"} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("README.md lacks %q (what ike-two-namespaces.sh prints)", want)
		}
	}
}

// exampleScript returns namespace names of this run's own (tag tells the
// tests apart; they do not meet the user's, whose defaults the README
// shows), a fresh directory for the example's copies, and a function that
// runs examples/NAME with them and ipsecdBin. On any way out of the test
// it runs "down", which is also what each test checks at its end.
func exampleScript(t *testing.T, name, tag string) (nsA, nsB, dir string, script func(args ...string) (string, error)) {
	nsA = fmt.Sprintf("ipsecd-t%d-%s-a", os.Getpid(), tag)
	nsB = fmt.Sprintf("ipsecd-t%d-%s-b", os.Getpid(), tag)
	dir = filepath.Join(t.TempDir(), strings.TrimSuffix(name, ".sh"))
	script = func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", append([]string{"../examples/" + name}, args...)...)
		cmd.Env = append(os.Environ(), "IPSECD="+ipsecdBin, "NS_A="+nsA, "NS_B="+nsB)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() { script("down", dir) })
	return nsA, nsB, dir, script
}
