//go:build linux

// Package charontest runs strongSwan's charon as an IKEv2 peer for tests:
// one charon per network namespace, each with a private /run (its vici
// socket and pid file live there), a strongswan.conf that logs the keys
// it derives, and swanctl to drive it. Debian's charon (strongswan-charon)
// with its userspace data plane kernel-libipsec is the one meant: this
// kernel has no ESP. Tests that use it need root; Require skips them
// otherwise. Not safe for concurrent use by several goroutines.
package charontest

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/internal/syncbuf"
)

// Bin is Debian's charon; it is not on PATH.
const Bin = "/usr/lib/ipsec/charon"

// hostPlugins are the plugins of Debian 12's charon that the tests use.
const hostPlugins = "random nonce openssl pem pkcs1 pkcs8 x509 pubkey revocation constraints curve25519 gcm chapoly aes sha2 sha1 hmac kdf gmp kernel-libipsec kernel-netlink socket-default vici eap-identity eap-mschapv2 eap-md5 eap-tls"

// conf is strongswan.conf: kernel-libipsec (this kernel has no ESP)
// before kernel-netlink, and ike = 4, chd = 4 so that the log holds the
// derived keys that tests compare with their own (level 4; 1 for none).
const conf = `charon {
  load = %[4]s
  install_routes = yes
  # Short retransmissions, so that a peer that stops answering is given
  # up in seconds, not minutes.
  retransmit_timeout = 1
  retransmit_base = 1
  retransmit_tries = 2
%[1]s
  filelog {
    test {
      path = %[2]s
      time_format = %%T
      default = 1
      ike = %[3]d
      chd = %[3]d
      flush_line = yes
    }
  }
  syslog { daemon { default = -1 } }
}
`

// Require skips the test without root, charon or swanctl.
func Require(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces and charon")
	}
	if _, err := os.Stat(Bin); err != nil {
		t.Skip("strongSwan's charon is not installed (scripts/test.sh installs strongswan-charon)")
	}
	if _, err := exec.LookPath("swanctl"); err != nil {
		t.Skip("swanctl is not installed (strongswan-swanctl)")
	}
}

// Charon is one charon in a network namespace with a private /run.
type Charon struct {
	t   testing.TB
	cmd *exec.Cmd
	out *syncbuf.Buffer
	// Dir holds strongswan.conf, swanctl.conf and the log.
	Dir string
	// Log is charon's file log, keys included.
	Log string
	// Pid is charon's process id (ip netns exec, unshare and sh all exec).
	Pid int
	// stopped is closed when the process has exited.
	stopped chan struct{}
	// root is the chroot charon runs in (StartSid), "" for the host's.
	root string
}

// Start starts charon in the network namespace ns and returns once its
// vici socket answers; extra goes into strongswan.conf's charon section.
// Charon is stopped when the test ends, and its output and log are
// logged if the test failed. Its log holds the keys it derives (Key).
func Start(t testing.TB, ns, extra string) *Charon {
	t.Helper()
	return start(t, ns, extra, 4)
}

// StartQuiet is Start with charon's default log levels: no keys and no
// hex dumps in its log, which would cost it time when it is measured.
func StartQuiet(t testing.TB, ns, extra string) *Charon {
	t.Helper()
	return start(t, ns, extra, 1)
}

func start(t testing.TB, ns, extra string, level int) *Charon {
	t.Helper()
	Require(t)
	dir := t.TempDir()
	c := &Charon{t: t, Dir: dir, Log: filepath.Join(dir, "charon.log"), out: &syncbuf.Buffer{}}
	confFile := filepath.Join(dir, "strongswan.conf")
	if err := os.WriteFile(confFile, []byte(fmt.Sprintf(conf, extra, c.Log, level, hostPlugins)), 0o600); err != nil {
		t.Fatal(err)
	}
	c.run(exec.Command("ip", "netns", "exec", ns, "unshare", "-m", "sh", "-c",
		"mount -t tmpfs tmpfs /run && exec env STRONGSWAN_CONF="+confFile+" "+Bin))
	return c
}

// run starts cmd, charon, and waits for its vici socket.
func (c *Charon) run(cmd *exec.Cmd) {
	t := c.t
	t.Helper()
	c.cmd = cmd
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.Pid = c.cmd.Process.Pid
	done := make(chan struct{})
	c.stopped = done
	go func() { c.cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		c.signal(syscall.SIGTERM, done)
		if t.Failed() {
			t.Logf("charon output:\n%s\ncharon log:\n%s", c.out.String(), c.LogSince(0))
		}
	})
	for i := 0; ; i++ {
		if _, err := c.Swanctl("--stats"); err == nil {
			break
		}
		select {
		case <-done:
			t.Fatalf("charon exited during start-up: %s", c.out.String())
		default:
		}
		if i == 50 {
			t.Fatalf("charon did not open its vici socket in 5 s: %s", c.out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// signal sends sig and waits up to 5 s for charon to exit, then kills it.
func (c *Charon) signal(sig syscall.Signal, done chan struct{}) {
	c.cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		c.cmd.Process.Kill()
		<-done
	}
}

// Kill ends charon at once with SIGKILL, so that it sends no delete: to
// its peer it has gone silent, as a crashed or unplugged peer does.
func (c *Charon) Kill() { c.signal(syscall.SIGKILL, c.stopped) }

// Swanctl runs swanctl inside charon's namespaces (its mount namespace
// holds the vici socket).
func (c *Charon) Swanctl(args ...string) (string, error) {
	return c.swanctlEnv(nil, args...)
}

func (c *Charon) swanctlEnv(env []string, args ...string) (string, error) {
	argv := []string{"-t", fmt.Sprint(c.Pid), "-m", "-n", "swanctl"}
	if c.root != "" {
		argv = []string{"-t", fmt.Sprint(c.Pid), "-m", "-n", "chroot", c.root, "swanctl"}
	}
	cmd := exec.Command("nsenter", append(argv, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	// swanctl waits as long as its --timeout says, or for ever without
	// one; a bound keeps a stuck charon from stalling the test.
	timer := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
	err := cmd.Wait()
	timer.Stop()
	return out.String(), err
}

// Load replaces charon's connections and secrets with swanctl.conf text
// conf (swanctl --load-all --clear).
func (c *Charon) Load(conf string) {
	c.t.Helper()
	c.LoadDir(conf, c.Dir)
}

// LoadDir is Load with the credentials in the directories under
// swanctlDir (x509, x509ca, private, ...), where conf is written too.
func (c *Charon) LoadDir(conf, swanctlDir string) {
	c.t.Helper()
	f := filepath.Join(swanctlDir, "swanctl.conf")
	if err := os.WriteFile(f, []byte(conf), 0o600); err != nil {
		c.t.Fatal(err)
	}
	dir := swanctlDir
	if c.root != "" {
		// The chroot sees Dir as /etc/swanctl (StartSid).
		rel, err := filepath.Rel(c.Dir, swanctlDir)
		if err != nil || strings.HasPrefix(rel, "..") {
			c.t.Fatalf("charontest: %s is not under %s, which the chroot sees", swanctlDir, c.Dir)
		}
		dir = filepath.Join(sidConfDir, rel)
		f = filepath.Join(dir, "swanctl.conf")
	}
	if out, err := c.swanctlEnv([]string{"SWANCTL_DIR=" + dir}, "--load-all", "--clear", "--file", f); err != nil {
		c.t.Fatalf("swanctl --load-all: %v\n%s", err, out)
	}
}

// ListSAs is swanctl --list-sas ("" when swanctl fails).
func (c *Charon) ListSAs() string {
	out, err := c.Swanctl("--list-sas")
	if err != nil {
		return ""
	}
	return out
}

// LogSize is the log's length: an offset for LogSince and Key that
// leaves out what an earlier step logged.
func (c *Charon) LogSize() int {
	b, _ := os.ReadFile(c.Log)
	return len(b)
}

// LogSince returns the log after offset from.
func (c *Charon) LogSince(from int) string {
	b, _ := os.ReadFile(c.Log)
	if from > len(b) {
		return ""
	}
	return string(b[from:])
}

// dumpLine is one line of charon's hex dumps: offset, then up to 16 bytes.
var dumpLine = regexp.MustCompile(`^\s*\d+: ((?:[0-9A-F]{2} ){0,15}[0-9A-F]{2})`)

// Key returns the first key charon logged as "NAME => N bytes @ ADDR",
// followed by hex dump lines, after offset from; nil if there is none.
// NAMEs are "Sk_ei secret", "encryption initiator key" and the like.
func (c *Charon) Key(from int, name string) []byte {
	keys := c.Keys(from, name)
	if len(keys) == 0 {
		return nil
	}
	return keys[0]
}

// Keys returns every key charon logged under name after offset from, in
// the order logged.
func (c *Charon) Keys(from int, name string) [][]byte {
	lines := strings.Split(c.LogSince(from), "\n")
	var keys [][]byte
	for i, l := range lines {
		if !strings.Contains(l, name+" =>") {
			continue
		}
		key := []byte{}
		for _, d := range lines[i+1:] {
			// The file logger prefixes every line with time and thread.
			if j := strings.Index(d, "] "); j >= 0 && j < 20 {
				d = d[j+2:]
			}
			m := dumpLine.FindStringSubmatch(d)
			if m == nil {
				break
			}
			h, _ := hex.DecodeString(strings.ReplaceAll(m[1], " ", ""))
			key = append(key, h...)
		}
		keys = append(keys, key)
	}
	return keys
}
