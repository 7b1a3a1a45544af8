package main

import (
	"bytes"
	"context"
	crand "crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"text/template"
	"time"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/internal/tcpcheck"
)

//go:embed demo/endpoint.yaml.tmpl
var demoTemplate string

// demoEndpoint is one side of the demo: its namespace and addresses.
type demoEndpoint struct {
	Name          string // A or B
	NS            string // network namespace
	Dev           string // its end of the veth pair
	Local, Peer   string // underlay addresses
	Port          int    // underlay UDP port, the same at both ends
	Mark          string // SO_MARK of the underlay; "" for none
	Inner, Remote string // its cleartext address, the other side's network
	Net           string // its cleartext network (IKE's local_ts)
	SPIOut, SPIIn string // the static-key demo's SAs
	KeyOut, KeyIn string
	ID, PeerID    string // the IKE demo's identities
	PSKFile       string // the IKE demo's pre-shared key, mode 0600
	Control       string // "" for none (the netstack demo)
	StateDir      string // state_dir: a temporary one, as the keys are fresh for every run
	cmd           *exec.Cmd
	log           bytes.Buffer
}

// runDemo is `ipsecd demo`: two endpoints in two network namespaces joined
// by a veth pair, each an `ipsecd run` of this binary with an embedded
// config. By default the two negotiate their keys with IKEv2 and rekey in
// the middle of the streams (demo_ike.go); with --static they run today's
// hand-keyed pair. Each sends a checksummed TCP stream to the other
// through the tunnel, then the demo prints what crossed and the counters.
// Everything it makes is removed when it ends, also on Ctrl-C. Without
// root, or with --netstack, the two endpoints are sidecar netstacks in
// this process instead, with IKE (demo_netstack_ike.go) or --static
// (demo_netstack.go).
func runDemo(args []string, stderr io.Writer) int {
	fs := newFlags("demo", "demo [--mib N] [--netstack] [--static] [--remote-access]", stderr)
	size := fs.Int("mib", 256, "MiB of TCP to send each way")
	static := fs.Bool("static", false, "static keys from the config instead of IKEv2, as before IKE (with --netstack too)")
	netstack := fs.Bool("netstack", false, "two sidecar netstacks in this process over loopback UDP instead of two daemons in network namespaces (the default without root)")
	remote := fs.Bool("remote-access", false, "a gateway with an address pool and a road warrior that gets its virtual IP from it, in network namespaces (root only)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(os.Stderr, "ipsecd demo: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *size <= 0 || *size > 1<<20 {
		fmt.Fprintf(os.Stderr, "ipsecd demo: --mib %d: want 1..%d\n", *size, 1<<20)
		return 2
	}
	if *remote {
		return runDemoRemoteAccess(int64(*size)<<20, *netstack || *static)
	}
	if !*netstack && os.Geteuid() != 0 {
		fmt.Println("ipsecd demo: not root, so no network namespaces or TUN devices: running the demo between two netstacks in one process (--netstack)")
		*netstack = true
	}
	if *netstack {
		run := demoNetstackIKE
		if *static {
			run = demoNetstack
		}
		if err := run(int64(*size) << 20); err != nil {
			fmt.Fprintln(os.Stderr, "ipsecd demo:", err)
			return 1
		}
		return 0
	}
	if err := demoCanRun(); err != nil {
		fmt.Fprintln(os.Stderr, "ipsecd demo:", err)
		return 1
	}
	if err := demo(int64(*size)<<20, *static); err != nil {
		fmt.Fprintln(os.Stderr, "ipsecd demo:", err)
		return 1
	}
	return 0
}

// demoCanRun says what the namespace demo needs and this machine lacks.
func demoCanRun() error {
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("needs the ip command (Debian package iproute2), or run --netstack")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return fmt.Errorf("needs /dev/net/tun for its TUN devices (%v; in a container: --device /dev/net/tun), or run --netstack", err)
	}
	return nil
}

// demo runs the namespace demo: with IKE, or with static keys.
func demo(size int64, static bool) (err error) {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "ipsecd-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	tag := fmt.Sprint(os.Getpid())
	a := &demoEndpoint{Name: "A", NS: "ipsecd-demo-a-" + tag, Dev: "veth-a", Local: "192.0.2.1", Peer: "192.0.2.2", Port: 4500, Mark: "0x100",
		Inner: "198.51.100.1", Remote: "203.0.113.0", Net: "198.51.100.0", Control: filepath.Join(dir, "a.sock")}
	b := &demoEndpoint{Name: "B", NS: "ipsecd-demo-b-" + tag, Dev: "veth-b", Local: "192.0.2.2", Peer: "192.0.2.1", Port: 4500, Mark: "0x100",
		Inner: "203.0.113.1", Remote: "198.51.100.0", Net: "203.0.113.0", Control: filepath.Join(dir, "b.sock")}
	render := demoConfig
	if static {
		keyAB, keyBA := demoKey(), demoKey()
		a.SPIOut, a.SPIIn, a.KeyOut, a.KeyIn, a.StateDir = "0x1001", "0x2001", keyAB, keyBA, filepath.Join(dir, "a-state")
		b.SPIOut, b.SPIIn, b.KeyOut, b.KeyIn, b.StateDir = "0x2001", "0x1001", keyBA, keyAB, filepath.Join(dir, "b-state")
	} else {
		psk, err := demoPSK(dir)
		if err != nil {
			return err
		}
		a.ID, a.PeerID, a.PSKFile, a.StateDir = "a.example.net", "b.example.net", psk, filepath.Join(dir, "a-state")
		b.ID, b.PeerID, b.PSKFile, b.StateDir = "b.example.net", "a.example.net", psk, filepath.Join(dir, "b-state")
		render = demoIKEConfig
	}

	// Ctrl-C ends the demo through the same clean-up as an error, and so
	// does a closed stdout (`ipsecd demo | head`): without Notify for
	// SIGPIPE, Go would exit at once and leave the namespaces behind.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGPIPE)
	defer stop()
	defer demoCleanup(a, b)

	how := "with static keys from their configs"
	if !static {
		how = "negotiating their keys with IKEv2"
	}
	fmt.Printf("ipsecd demo: two ipsecd daemons in network namespaces %s and %s, joined by a veth pair, %s\n", a.NS, b.NS, how)
	if err := demoNetwork(a, b); err != nil {
		return err
	}
	if err := demoStart(ctx, self, dir, render, a, b); err != nil {
		return err
	}
	for _, e := range []*demoEndpoint{a, b} {
		fmt.Printf("  %s: underlay %s:4500, ipsec1 %s/24, routes %s/24 into the tunnel\n", e.Name, e.Local, e.Inner, e.Remote)
	}
	if !static {
		return demoIKE(ctx, daemonEnd{a, self}, daemonEnd{b, self}, size)
	}
	fmt.Println("  suite rfc4106(gcm(aes)) 128-bit, tunnel mode, ESP in UDP, ESN, replay window 1024")
	fmt.Println()

	for _, dir := range [][2]*demoEndpoint{{a, b}, {b, a}} {
		if err := ctx.Err(); err != nil {
			return err
		}
		from, to := dir[0], dir[1]
		fmt.Printf("TCP %s → %s: sending %d MiB ...\n", from.Name, to.Name, size>>20)
		took, err := demoTCP(ctx, from, to, size, nil)
		if err != nil {
			return fmt.Errorf("TCP %s → %s: %w", from.Name, to.Name, err)
		}
		demoPrintTransfer(from, to, size, took)
	}
	fmt.Println()
	for _, e := range []*demoEndpoint{a, b} {
		if err := demoReport(e); err != nil {
			return err
		}
	}
	return nil
}

// demoStart writes each endpoint's config, rendered by render, into dir,
// starts `ipsecd run` on it in the endpoint's namespace, and waits until
// every daemon answers on its control socket, saying so as it goes.
func demoStart(ctx context.Context, self, dir string, render func(*demoEndpoint) ([]byte, error), eps ...*demoEndpoint) error {
	for _, e := range eps {
		cfg, err := render(e)
		if err != nil {
			return err
		}
		path := filepath.Join(dir, strings.ToLower(strings.ReplaceAll(e.Name, " ", "-"))+".yaml")
		if err := os.WriteFile(path, cfg, 0o600); err != nil {
			return err
		}
		e.cmd = exec.Command("ip", "netns", "exec", e.NS, self, "run", "--config", path)
		e.cmd.Stdout, e.cmd.Stderr = &e.log, &e.log
		if err := e.cmd.Start(); err != nil {
			return err
		}
	}
	fmt.Print("waiting for the two daemons to answer on their control sockets ... ")
	start := time.Now()
	for _, e := range eps {
		if err := demoWait(ctx, e); err != nil {
			fmt.Println()
			return err
		}
	}
	fmt.Printf("up in %v\n", demoSince(start))
	return nil
}

// demoSince is the time since start, rounded for a progress line.
func demoSince(start time.Time) time.Duration {
	return time.Since(start).Round(time.Millisecond)
}

// demoConfig renders the embedded default config for e.
func demoConfig(e *demoEndpoint) ([]byte, error) {
	var cfg bytes.Buffer
	if err := demoTmpl.Execute(&cfg, e); err != nil {
		return nil, err
	}
	return cfg.Bytes(), nil
}

var demoTmpl = template.Must(template.New("endpoint").Parse(demoTemplate))

func demoPrintTransfer(from, to *demoEndpoint, size int64, took time.Duration) {
	fmt.Printf("TCP %s %s → %s %s:5201: %d MiB in %v, %.2f Gbit/s, SHA-256 equal at both ends\n",
		from.Name, from.Inner, to.Name, to.Inner, size>>20, took.Round(time.Millisecond), float64(size*8)/took.Seconds()/1e9)
}

func demoKey() string {
	k := make([]byte, 20) // AES-128 key and 4-byte salt
	crand.Read(k)
	return "0x" + hex.EncodeToString(k)
}

// demoNetwork makes the namespaces and the veth pair.
func demoNetwork(a, b *demoEndpoint) error {
	steps := [][]string{
		{"netns", "add", a.NS},
		{"netns", "add", b.NS},
		{"-n", a.NS, "link", "add", a.Dev, "type", "veth", "peer", "name", b.Dev, "netns", b.NS},
	}
	for _, e := range []*demoEndpoint{a, b} {
		steps = append(steps,
			[]string{"-n", e.NS, "addr", "add", e.Local + "/24", "dev", e.Dev},
			[]string{"-n", e.NS, "link", "set", e.Dev, "up"},
			[]string{"-n", e.NS, "link", "set", "lo", "up"})
	}
	for _, s := range steps {
		if out, err := exec.Command("ip", s...).CombinedOutput(); err != nil {
			err = fmt.Errorf("ip %s: %v: %s", strings.Join(s, " "), err, bytes.TrimSpace(out))
			if bytes.Contains(out, []byte("Operation not permitted")) {
				// Root without the capabilities: a container, say.
				err = fmt.Errorf("%w (network namespaces and veth pairs need CAP_SYS_ADMIN and CAP_NET_ADMIN; without them, run --netstack)", err)
			}
			return err
		}
	}
	return nil
}

// demoWait waits until e's daemon answers on its control socket.
func demoWait(ctx context.Context, e *demoEndpoint) error {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if c, err := control.Dial(e.Control); err == nil {
			_, err := c.Stats()
			c.Close()
			if err == nil {
				return nil
			}
		}
		if e.cmd.ProcessState != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("endpoint %s did not start:\n%s", e.Name, e.log.String())
}

// demoTCP sends size pseudo-random bytes from a socket in from's namespace
// to one in to's, and compares SHA-256 digests at both ends; mid, if not
// nil, runs half-way through (see tcpcheck.Stream).
func demoTCP(ctx context.Context, from, to *demoEndpoint, size int64, mid func(sent *atomic.Int64) error) (time.Duration, error) {
	var ln net.Listener
	if err := inNetns(to.NS, func() (err error) {
		ln, err = net.Listen("tcp", net.JoinHostPort(to.Inner, "5201"))
		return err
	}); err != nil {
		return 0, err
	}
	return tcpcheck.Stream(ctx, ln, func(ctx context.Context) (c net.Conn, err error) {
		err = inNetns(from.NS, func() (err error) {
			d := net.Dialer{Timeout: 10 * time.Second}
			c, err = d.DialContext(ctx, "tcp", net.JoinHostPort(to.Inner, "5201"))
			return err
		})
		return c, err
	}, size, mid)
}

// demoReport prints e's SAs and the counters that are not zero.
func demoReport(e *demoEndpoint) error {
	c, err := control.Dial(e.Control)
	if err != nil {
		return err
	}
	defer c.Close()
	states, err := c.States(false)
	if err != nil {
		return err
	}
	fmt.Printf("endpoint %s (ipsecd state list):\n", e.Name)
	for _, s := range states {
		fmt.Printf("  %-3s spi %#x %s → %s  %d packets, %d bytes, replay %d, integrity-failed %d\n",
			s.Config.Dir, s.Config.SPI, s.Config.Src, s.Config.Dst, s.Stats.Packets, s.Stats.Bytes, s.Stats.Replay, s.Stats.IntegrityFailed)
	}
	stats, err := c.Stats()
	if err != nil {
		return err
	}
	fmt.Printf("endpoint %s (ipsecd stats, non-zero):\n", e.Name)
	zero := true
	for _, s := range stats {
		if s.Value != 0 {
			fmt.Printf("  %s\t%d\n", s.Name, s.Value)
			zero = false
		}
	}
	if zero {
		fmt.Println("  (all zero)")
	}
	return nil
}

// demoCleanup stops the daemons (SIGTERM, which removes their TUN
// devices) and removes the namespaces.
func demoCleanup(eps ...*demoEndpoint) {
	for _, e := range eps {
		if e.cmd != nil && e.cmd.Process != nil {
			e.cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan error, 1)
			go func() { done <- e.cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				e.cmd.Process.Kill()
			}
		}
		exec.Command("ip", "netns", "del", e.NS).Run()
	}
}
