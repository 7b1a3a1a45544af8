//go:build linux

// Package netnstest gives tests a network namespace of their own: created
// with `ip netns add`, removed in t.Cleanup even when the test fails, and a
// way to run code on a thread inside it. Tests that use it need root; New
// skips the test with a message otherwise. Linux only.
package netnstest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/vishvananda/netns"
)

// NS is a network namespace made for one test.
type NS struct {
	Name string
}

// New creates a fresh network namespace named after prefix, with lo up, and
// removes it, and kills every process still in it, when the test ends. It
// skips the test unless run as root with the ip command available.
func New(t testing.TB, prefix string) *NS {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("netnstest: needs root (network namespaces and TUN devices)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("netnstest: needs the ip command (iproute2)")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skip("netnstest: needs /dev/net/tun")
	}
	var r [4]byte
	rand.Read(r[:])
	ns := &NS{Name: prefix + "-" + hex.EncodeToString(r[:])}
	if out, err := exec.Command("ip", "netns", "add", ns.Name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", ns.Name, err, out)
	}
	t.Cleanup(func() {
		// A process left inside (a daemon of a failed test) would
		// keep the namespace's devices alive after its name is gone.
		// The test's own process is listed too when Do ran on its
		// main thread, which the runtime parks rather than ends.
		if out, err := exec.Command("ip", "netns", "pids", ns.Name).Output(); err == nil {
			for _, pid := range strings.Fields(string(out)) {
				if pid != strconv.Itoa(os.Getpid()) {
					exec.Command("kill", "-9", pid).Run()
				}
			}
		}
		if out, err := exec.Command("ip", "netns", "del", ns.Name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", ns.Name, err, out)
		}
	})
	ns.IP(t, "link", "set", "lo", "up")
	return ns
}

// IP runs `ip -n NAME args...` and returns its standard output; it fails
// the test on error.
func (ns *NS) IP(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"-n", ns.Name}, args...)...).Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("ip -n %s %s: %v: %s", ns.Name, strings.Join(args, " "), err, msg)
	}
	return string(out)
}

// Do runs f on an OS thread that has entered the namespace, and waits for
// it. Sockets and TUN devices that f creates belong to the namespace and
// may be used from any goroutine afterwards. The thread is discarded when f
// returns, so no other goroutine ever runs in the namespace. f must not call
// t.Fatal; return an error instead.
func (ns *NS) Do(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the goroutine exits locked, and the runtime
		// then ends the thread rather than reuse it in the namespace.
		runtime.LockOSThread()
		h, err := netns.GetFromName(ns.Name)
		if err != nil {
			errc <- fmt.Errorf("netnstest: open namespace: %w", err)
			return
		}
		err = netns.Set(h)
		h.Close()
		if err != nil {
			errc <- fmt.Errorf("netnstest: setns: %w", err)
			return
		}
		errc <- f()
	}()
	return <-errc
}
