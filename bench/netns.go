package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The underlay: a veth pair between namespaces A and B, on documentation
// addresses that exist only inside the two namespaces.
const (
	underlayA = "192.0.2.1"
	underlayB = "192.0.2.2"
)

// lab is the two namespaces of one benchmark run and every process the
// run started in them. close removes all of it; it is safe to call more
// than once.
type lab struct {
	dir  string // scratch directory: configs, keys, sockets, logs
	a, b *netns
	// procs are the long-running processes started by start, in order.
	procs []*process
}

// netns is a named network namespace (ip netns).
type netns struct {
	name string
}

// newLab creates namespaces A and B, joins them with a veth pair and
// brings both ends up. On error it removes what it made.
func newLab(ctx context.Context, dir string) (l *lab, err error) {
	l = &lab{dir: dir}
	defer func() {
		if err != nil {
			l.close()
		}
	}()
	for _, side := range []struct {
		ns     **netns
		suffix string
	}{{&l.a, "a"}, {&l.b, "b"}} {
		ns := &netns{name: fmt.Sprintf("ipsecd-bench-%d-%s", os.Getpid(), side.suffix)}
		if err := run(ctx, "ip", "netns", "add", ns.name); err != nil {
			return nil, err
		}
		*side.ns = ns
		if err := ns.run(ctx, "ip", "link", "set", "lo", "up"); err != nil {
			return nil, err
		}
	}
	if err := l.a.run(ctx, "ip", "link", "add", "veth0", "type", "veth", "peer", "name", "veth1", "netns", l.b.name); err != nil {
		return nil, err
	}
	for _, side := range []struct {
		ns        *netns
		dev, addr string
	}{{l.a, "veth0", underlayA}, {l.b, "veth1", underlayB}} {
		if err := side.ns.run(ctx, "ip", "addr", "add", side.addr+"/24", "dev", side.dev); err != nil {
			return nil, err
		}
		if err := side.ns.run(ctx, "ip", "link", "set", side.dev, "up"); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// close stops the processes the run started (newest first), kills
// whatever is still inside the namespaces and deletes them, which also
// removes the veth pair and any TUN device left behind.
func (l *lab) close() {
	for i := len(l.procs) - 1; i >= 0; i-- {
		l.procs[i].stop()
	}
	l.procs = nil
	for _, ns := range []*netns{l.a, l.b} {
		if ns == nil {
			continue
		}
		if out, err := exec.Command("ip", "netns", "pids", ns.name).Output(); err == nil {
			for _, f := range strings.Fields(string(out)) {
				var pid int
				if _, err := fmt.Sscan(f, &pid); err == nil && pid > 1 {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		exec.Command("ip", "netns", "del", ns.name).Run()
	}
	l.a, l.b = nil, nil
}

// command returns name args... to be run inside ns.
func (ns *netns) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns.name, name}, args...)...)
}

// run runs a short command inside ns; the error carries its output.
func (ns *netns) run(ctx context.Context, name string, args ...string) error {
	_, err := ns.output(ctx, name, args...)
	return err
}

// output runs a short command inside ns, bounded to 60 s, and returns
// its standard output.
func (ns *netns) output(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return output(ns.command(ctx, name, args...))
}

// run runs a short command in the initial namespace, bounded to 60 s.
func run(ctx context.Context, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	_, err := output(exec.CommandContext(ctx, name, args...))
	return err
}

func output(cmd *exec.Cmd) (string, error) {
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w\n%s%s", strings.Join(cmd.Args, " "), err, out, stderr.String())
	}
	return string(out), nil
}

// process is a long-running command inside a namespace, its output
// going to a log file in the lab's directory.
type process struct {
	name string // for messages and the log file
	cmd  *exec.Cmd
	log  string // path of the log file
	done chan struct{}
	err  error // Wait's result, set before done is closed
	// stopWait is how long stop waits after SIGTERM before it kills
	// (10 s when zero). A daemon with thousands of interfaces needs
	// minutes to remove them; killed, it leaves the kernel removing them
	// one by one while the next case runs.
	stopWait time.Duration
}

// start starts name args... inside ns with the extra environment env.
// The process is stopped by stop or by lab.close, whichever comes first.
// `ip netns exec` execs the command, so the process's PID is the
// command's own.
func (l *lab) start(ns *netns, label string, env []string, name string, args ...string) (*process, error) {
	p := &process{name: label, log: filepath.Join(l.dir, label+".log"), done: make(chan struct{})}
	f, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p.cmd = exec.Command("ip", append([]string{"netns", "exec", ns.name, name}, args...)...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	// Its own process group: a Ctrl-C at the terminal reaches only the
	// benchmark, which then stops its processes in order.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	l.procs = append(l.procs, p)
	return p, nil
}

// pid is the process's PID.
func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop sends SIGTERM, waits up to 10 s, then SIGKILL. It returns an
// error when the process had to be killed or exited with a failure other
// than from the SIGTERM.
func (p *process) stop() error {
	if done, err := p.exited(); done {
		return err
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		var ee *exec.ExitError
		if errors.As(p.err, &ee) && ee.ProcessState.Sys().(syscall.WaitStatus).Signal() == syscall.SIGTERM {
			return nil
		}
		return p.err
	case <-time.After(cmp.Or(p.stopWait, 10*time.Second)):
		p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within %v of SIGTERM; killed", p.name, cmp.Or(p.stopWait, 10*time.Second))
	}
}

// logTail returns the last n lines of the process's log.
func (p *process) logTail(n int) string {
	data, _ := os.ReadFile(p.log)
	return tail(string(data), n)
}

// remove stops p and forgets it.
func (l *lab) remove(p *process) error {
	err := p.stop()
	for i, q := range l.procs {
		if q == p {
			l.procs = append(l.procs[:i], l.procs[i+1:]...)
			break
		}
	}
	return err
}

// waitFor polls cond every 50 ms until it returns true, ctx is done, or
// timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %v", what, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}
