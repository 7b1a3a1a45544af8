//go:build linux

package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// stateJSON is one SA as `ipsecd state list --json` prints it (the config
// file's field names plus stats).
type stateJSON struct {
	Src  string `json:"src"`
	Dst  string `json:"dst"`
	SPI  string `json:"spi"` // 0x1001
	Dir  string `json:"dir"`
	Mode string `json:"mode"`
	IfID uint32 `json:"if_id"`
	AEAD *struct {
		Name string `json:"name"`
		Key  string `json:"key"`
	} `json:"aead"`
	Stats struct {
		Bytes   uint64 `json:"bytes"`
		Packets uint64 `json:"packets"`
		Seq     uint64 `json:"seq"`
	} `json:"stats"`
}

// states returns the daemon's SAs from `state list --json`.
func (d *daemon) states() []stateJSON {
	d.t.Helper()
	out, err := d.ctl("state", "list", "--json")
	if err != nil {
		d.t.Fatalf("ipsecd state list --json: %v\n%s", err, out)
	}
	var st []stateJSON
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		d.t.Fatalf("ipsecd state list --json: %v\n%s", err, out)
	}
	return st
}

// state returns the SA with spi and dir, failing the test if there is none.
func (d *daemon) state(spi int, dir string) stateJSON {
	d.t.Helper()
	for _, s := range d.states() {
		if v, _ := strconv.ParseUint(s.SPI, 0, 32); int(v) == spi && s.Dir == dir {
			return s
		}
	}
	d.t.Fatalf("%s: no SA spi 0x%x dir %s", d.ns.name, spi, dir)
	return stateJSON{}
}

// pid is the daemon's process id: `ip netns exec` execs the binary, so the
// process started is the daemon itself.
func (d *daemon) pid() int { return d.cmd.Process.Pid }

// rssKiB is the daemon's resident set size (VmRSS) in KiB.
func (d *daemon) rssKiB() int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.pid()))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return -1
}

// waitExit waits up to timeout for the daemon to exit and returns its
// exit error (nil for status 0).
func (d *daemon) waitExit(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case err := <-d.done:
		d.done <- err
		return err
	case <-time.After(timeout):
		t.Fatalf("ipsecd in %s did not exit within %v", d.ns.name, timeout)
		return nil
	}
}

// waitLog waits up to 10 s for the daemon's log to contain want, and
// returns the log.
func (d *daemon) waitLog(t *testing.T, want string) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		log := d.log.String()
		if strings.Contains(log, want) {
			return log
		}
		if time.Now().After(deadline) {
			t.Fatalf("ipsecd log in %s: no %q within 10 s:\n%s", d.ns.name, want, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
