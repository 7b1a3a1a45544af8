package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/internal/syncbuf"
)

// realDaemon is `ipsecd run` of the built binary in a network namespace
// of its own (unshare -n: its TUN devices and sockets touch nothing
// outside), with its control socket in a fresh directory.
type realDaemon struct {
	t    *testing.T
	cfg  string // the config file
	sock string
	log  *syncbuf.Buffer
	cmd  *exec.Cmd
	done chan error
}

// startDaemon writes the config text (its control key is added) and runs
// the daemon until the test ends, waiting up to 10 s for it to answer.
func startDaemon(t *testing.T, text string) *realDaemon {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs the daemon in a new network namespace")
	}
	dir, err := os.MkdirTemp("", "ipsecd-ops") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	d := &realDaemon{t: t, cfg: filepath.Join(dir, "ipsecd.yaml"), sock: filepath.Join(dir, "ipsecd.sock"), log: &syncbuf.Buffer{},
		done: make(chan error, 1)}
	d.write(text)
	d.cmd = exec.Command("unshare", "-n", ipsecdBinary(t), "run", "--config", d.cfg)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() {
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(10 * time.Second):
			d.cmd.Process.Kill()
			<-d.done
			t.Errorf("the daemon did not stop within 10 s of SIGTERM")
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		if code, _, _ := execIpsecd(t, "health", "--control", d.sock, "--timeout", "1s"); code == 0 {
			return d
		}
		select {
		case err := <-d.done:
			t.Fatalf("the daemon exited: %v\n%s", err, d.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon does not answer after 10 s:\n%s", d.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// write replaces the config file's text.
func (d *realDaemon) write(text string) {
	d.t.Helper()
	if err := os.WriteFile(d.cfg, []byte("control: "+d.sock+"\nunderlay: {udp: 127.0.0.1:4500}\nstate_dir: "+
		filepath.Join(filepath.Dir(d.cfg), "state")+"\n"+text), 0o600); err != nil {
		d.t.Fatal(err)
	}
}

// ipsecd runs a control command of the built binary against the daemon
// and fails the test unless it exits with want.
func (d *realDaemon) ipsecd(want int, args ...string) (stdout, stderr string) {
	d.t.Helper()
	code, o, e := execIpsecd(d.t, append(args, "--control", d.sock)...)
	if code != want {
		d.t.Fatalf("ipsecd %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, want, o, e)
	}
	return o, e
}

// opsState is a state of the config file: out, 192.0.2.1 -> 192.0.2.2.
func opsState(spi int, key string) string {
	return fmt.Sprintf("  - {src: 192.0.2.1, dst: 192.0.2.2, spi: 0x%x, dir: out, mode: tunnel, if_id: 1, encap: {type: espinudp}, "+
		"aead: {name: \"rfc4106(gcm(aes))\", key: \"0x%s\"}}\n", spi, key)
}

// Two AES-GCM-128 keys with their salts.
const (
	key1 = "0102030405060708090a0b0c0d0e0f1011121314"
	key2 = "a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4"
)

const opsInterfaces = "interfaces:\n  - {name: ipsec1, if_id: 1}\nstates:\n"

// TestStateCountUpdateFlushAndReload runs the maintenance commands
// against a real daemon: state count, state update (limits in place),
// reload (the counts of what changed, with the updated SA set back to the
// file's limits; a broken file refused with its FILE:LINE errors, exit 1,
// and nothing changed) and state flush.
func TestStateCountUpdateFlushAndReload(t *testing.T) {
	d := startDaemon(t, opsInterfaces+opsState(0x1001, key1))
	if out, _ := d.ipsecd(0, "state", "count"); out != "SAD count 1 (in 0, out 1)\n" {
		t.Errorf("state count: %q", out)
	}
	d.ipsecd(0, "state", "update", "--spi", "0x1001", "--dst", "192.0.2.2", "--hard-packets", "500", "--soft-add-seconds", "60")
	if out, _ := d.ipsecd(0, "state", "get", "--spi", "0x1001", "--dst", "192.0.2.2"); !strings.Contains(out, "limit: soft (INF)(packets), hard 500(packets)") ||
		!strings.Contains(out, "expire add: soft 60(sec), hard 0(sec)") {
		t.Errorf("state get after update lacks the new limits:\n%s", out)
	}
	if _, e := d.ipsecd(2, "state", "update", "--spi", "0x1001", "--dst", "192.0.2.2"); !strings.Contains(e, "give at least one lifetime flag") {
		t.Errorf("update without limits: %s", e)
	}
	if _, e := d.ipsecd(1, "state", "update", "--spi", "0x1001", "--dst", "192.0.2.2", "--soft-packets", "900"); !strings.Contains(e, "soft_packets") {
		t.Errorf("update with soft above hard: %s", e)
	}

	d.write(opsInterfaces + opsState(0x1001, key1) + opsState(0x1002, key2))
	out, _ := d.ipsecd(0, "reload")
	if !strings.Contains(out, d.cfg+": reloaded: interfaces added 0 removed 0 reconfigured 0 replaced 0\n") ||
		!strings.Contains(out, "states added 1 removed 0 kept 1 taken 0 updated 1\n") {
		t.Errorf("reload:\n%s", out)
	}
	js, _ := d.ipsecd(0, "reload", "--json")
	var res struct {
		StatesKept    int `json:"states_kept"`
		StatesAdded   int `json:"states_added"`
		StatesUpdated int `json:"states_updated"`
	}
	if err := json.Unmarshal([]byte(js), &res); err != nil || res.StatesKept != 2 || res.StatesAdded != 0 || res.StatesUpdated != 0 {
		t.Errorf("reload --json of the same file: %+v (%v)\n%s", res, err, js)
	}

	d.write(opsInterfaces + opsState(0x1001, key1) + opsState(0x1002, key2) + opsState(0x1003, "00"))
	_, e := d.ipsecd(1, "reload")
	if !strings.Contains(e, d.cfg+":9: states[2].aead.key: rfc4106(gcm(aes)) wants 20 or 36 bytes") || !strings.Contains(e, "the running config stays") {
		t.Errorf("reload of a broken file:\n%s", e)
	}
	if out, _ := d.ipsecd(0, "state", "count", "--json"); !strings.Contains(out, `"count": 2`) {
		t.Errorf("state count --json after the refused reload: %s", out)
	}
	// A monitor of the real daemon sees the flush.
	mon := exec.Command(ipsecdBinary(t), "monitor", "--json", "--control", d.sock)
	monOut, err := mon.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := mon.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { mon.Process.Kill(); mon.Wait() }()
	events := make(chan string, 10)
	go func() {
		sc := bufio.NewScanner(monOut)
		for sc.Scan() {
			events <- sc.Text()
		}
	}()
	// The monitor subscribes before its first event; an SA added and
	// deleted until it reports one shows that it listens.
	for i := 0; ; i++ {
		d.ipsecd(0, "state", "update", "--spi", "0x1001", "--dst", "192.0.2.2", "--hard-packets", fmt.Sprint(600+i))
		select {
		case ev := <-events:
			if !strings.Contains(ev, `"type":"state_updated"`) {
				t.Errorf("monitor: %s", ev)
			}
		case <-time.After(100 * time.Millisecond):
			if i < 50 {
				continue
			}
			t.Fatal("ipsecd monitor reports nothing after 5 s")
		}
		break
	}
	if out, _ := d.ipsecd(0, "state", "flush"); out != "flushed 2 SAs\n" {
		t.Errorf("state flush: %q", out)
	}
	for deleted := 0; deleted < 2; {
		select {
		case ev := <-events:
			if strings.Contains(ev, `"type":"state_updated"`) {
				continue // a late one of the loop above
			}
			deleted++
			if !strings.Contains(ev, `"type":"state_deleted"`) || !strings.Contains(ev, `"reason":"flushed"`) {
				t.Errorf("monitor after the flush: %s", ev)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("ipsecd monitor did not report the flush within 5 s")
		}
	}
	if out, _ := d.ipsecd(0, "state", "count"); out != "SAD count 0 (in 0, out 0)\n" {
		t.Errorf("state count after flush: %q", out)
	}
	if strings.Count(d.log.String(), "reloaded:") != 2 {
		t.Errorf("the daemon's log does not have the two reloads:\n%s", d.log.String())
	}
}
