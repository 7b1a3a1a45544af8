//go:build linux

package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/internal/syncbuf"
	"github.com/ipsecd/ipsecd/tun/netnstest"
)

// netns is a network namespace owned by one test (netnstest.New: lo up,
// removed with every process still in it when the test ends).
type netns struct {
	*netnstest.NS
	name string
}

func newNetns(t *testing.T) *netns {
	t.Helper()
	ns := netnstest.New(t, "ipsecd-t")
	return &netns{NS: ns, name: ns.Name}
}

// cmd returns a command that runs inside the namespace.
func (ns *netns) cmd(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns.name, name}, args...)...)
}

// run runs a command inside the namespace with a 60 s bound.
func (ns *netns) run(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := ns.cmd(ctx, name, args...).CombinedOutput()
	return string(out), err
}

func (ns *netns) mustRun(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := ns.run(name, args...)
	if err != nil {
		t.Fatalf("in %s: %s %s: %v\n%s", ns.name, name, strings.Join(args, " "), err, out)
	}
	return out
}

func mustRun(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// The underlay addresses of the veth pair joining the two namespaces
// (documentation ranges, alive only inside the test's namespaces).
const (
	underlayA4 = "192.0.2.1"
	underlayB4 = "192.0.2.2"
	underlayA6 = "2001:db8:ff::1"
	underlayB6 = "2001:db8:ff::2"
)

// pair is two namespaces joined by a veth pair, A and B.
type pair struct {
	a, b *netns
}

func newPair(t *testing.T) *pair {
	t.Helper()
	p := &pair{a: newNetns(t), b: newNetns(t)}
	p.a.mustRun(t, "ip", "link", "add", "veth0", "type", "veth", "peer", "name", "veth1", "netns", p.b.name)
	for _, side := range []struct {
		ns     *netns
		dev    string
		v4, v6 string
	}{{p.a, "veth0", underlayA4, underlayA6}, {p.b, "veth1", underlayB4, underlayB6}} {
		side.ns.mustRun(t, "ip", "addr", "add", side.v4+"/24", "dev", side.dev)
		side.ns.mustRun(t, "ip", "addr", "add", side.v6+"/64", "dev", side.dev, "nodad")
		side.ns.mustRun(t, "ip", "link", "set", side.dev, "up")
	}
	return p
}

// daemon is one `ipsecd run` process inside a namespace.
type daemon struct {
	t       *testing.T
	ns      *netns
	cfgPath string
	control string
	// stateDir is the daemon's own state_dir, so that tests never
	// share /var/lib/ipsecd (nor resume each other's keys).
	stateDir string
	cmd      *exec.Cmd
	log      *syncbuf.Buffer
	done     chan error
}

// startDaemon writes cfg (a YAML config whose control key, first line,
// and state_dir, last line, are filled in here) and starts the real binary
// in ns. It returns when the control socket answers, and stops the daemon
// when the test ends.
func startDaemon(t *testing.T, ns *netns, cfg string) *daemon {
	t.Helper()
	dir := t.TempDir()
	d := &daemon{t: t, ns: ns, cfgPath: filepath.Join(dir, "ipsecd.yaml"), control: filepath.Join(dir, "ipsecd.sock"),
		stateDir: filepath.Join(dir, "state"), log: &syncbuf.Buffer{}, done: make(chan error, 1)}
	if err := os.WriteFile(d.cfgPath, []byte(d.file(cfg)), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.stop()
		if t.Failed() {
			t.Logf("ipsecd log in %s:\n%s", ns.name, d.log.String())
		}
	})
	d.start()
	return d
}

// file is cfg with the daemon's control key on the first line (so that
// line numbers in cfg move by one) and its state_dir after the rest.
func (d *daemon) file(cfg string) string {
	return "control: " + d.control + "\n" + cfg + "\nstate_dir: " + d.stateDir + "\n"
}

// start runs the binary on d's config file, and returns once the control
// socket answers (startDaemon, and a test that restarts the daemon).
func (d *daemon) start() {
	t, ns := d.t, d.ns
	t.Helper()
	d.cmd = exec.Command("ip", "netns", "exec", ns.name, ipsecdBin, "run", "--config", d.cfgPath)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	d.done = make(chan error, 1) // a restart waits for the new process
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := d.ctl("stats"); err == nil {
			return
		}
		select {
		case err := <-d.done:
			d.done <- err
			t.Fatalf("ipsecd exited during start-up: %v\n%s", err, d.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("ipsecd did not answer on %s within 15 s\n%s", d.control, d.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits; it kills the daemon after 10 s. It returns
// the process's exit error (nil for exit 0).
func (d *daemon) stop() error {
	if d.cmd == nil || d.cmd.Process == nil || d.cmd.ProcessState != nil { // not started, or exited
		return nil
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		d.done <- err
		return err
	case <-time.After(10 * time.Second):
		d.cmd.Process.Kill()
		err := <-d.done
		d.done <- err
		return fmt.Errorf("ipsecd did not stop within 10 s of SIGTERM: %v", err)
	}
}

// ctl runs an ipsecd control command against this daemon.
func (d *daemon) ctl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, ipsecdBin, append(args, "--control", d.control)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// stats returns the daemon's global counters.
func (d *daemon) stats() map[string]uint64 {
	d.t.Helper()
	out, err := d.ctl("stats")
	if err != nil {
		d.t.Fatalf("ipsecd stats: %v\n%s", err, out)
	}
	m := map[string]uint64{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var name string
		var v uint64
		if _, err := fmt.Sscanf(sc.Text(), "%s\t%d", &name, &v); err == nil {
			m[name] = v
		}
	}
	if len(m) == 0 {
		d.t.Fatalf("ipsecd stats printed no counters:\n%s", out)
	}
	return m
}
