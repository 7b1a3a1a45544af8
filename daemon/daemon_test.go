package daemon

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/control"
)

// TestStartReloadStop drives the daemon as cmd/ipsecd does, through its
// exported API alone: Start brings a file up (no interfaces, so no TUN:
// the underlay on loopback and the control socket), Reload applies a
// changed file and refuses a broken one naming FILE:LINE with the
// running config kept, Reload over the control socket answers the same,
// and Stop closes the socket.
func TestStartReloadStop(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "ipsecd.sock")
	path := filepath.Join(dir, "ipsecd.yaml")
	udp := freeUDP(t)
	file := func(level string) string {
		return "control: " + sock + "\nstate_dir: " + filepath.Join(dir, "state") +
			"\nlog: {level: " + level + "}\nunderlay: {udp: " + udp + "}\n"
	}
	if err := os.WriteFile(path, []byte(file("info")), 0o600); err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	d, stop := startFile(t, path, log)
	c, err := control.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Ping(); err != nil {
		t.Fatalf("ping: %v", err)
	}

	if err := os.WriteFile(path, []byte(file("debug")), 0o600); err != nil {
		t.Fatal(err)
	}
	if res, err := d.Reload(path); err != nil || res.File != path {
		t.Fatalf("Reload = %+v, %v; want it applied", res, err)
	}
	if got := log.GetLevel(); got != logrus.DebugLevel {
		t.Errorf("log level %v after the reload, want debug", got)
	}

	if err := os.WriteFile(path, []byte(file("debug")+"interfaces: [{name: x, if_id: 0}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Reload(path); err == nil || !strings.Contains(err.Error(), path+":") {
		t.Fatalf("Reload of a broken file: %v, want FILE:LINE errors", err)
	}
	if _, err := c.Reload(); !errors.Is(err, control.ErrInvalid) || !strings.Contains(err.Error(), path+":") {
		t.Fatalf("reload over the control socket: %v, want ErrInvalid with FILE:LINE", err)
	}
	if err := c.Ping(); err != nil {
		t.Fatalf("ping after refused reloads: %v", err)
	}

	if err := stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("control socket after Stop: %v, want it gone", err)
	}
}

// freeUDP returns a loopback UDP address that was free a moment ago.
func freeUDP(t *testing.T) string {
	t.Helper()
	u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	return u.LocalAddr().String()
}

// startFile starts the daemon from the config file at path, as
// cmd/ipsecd does. stop stops it once (the test's end stops it too).
func startFile(t *testing.T, path string, log *logrus.Logger) (d *Daemon, stop func() error) {
	t.Helper()
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err = Start(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	var stopErr error
	stop = func() error {
		once.Do(func() { stopErr = d.Stop() })
		return stopErr
	}
	t.Cleanup(func() { stop() })
	return d, stop
}
