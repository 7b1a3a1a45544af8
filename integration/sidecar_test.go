//go:build linux

package integration

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/internal/syncbuf"
	"github.com/ipsecd/ipsecd/stack/stackfile"
)

// TestSidecar joins a sidecar (package stack: a netstack with ESP in UDP,
// linked into a program) and a real `ipsecd run` daemon. The daemon runs
// in namespace A with its TUN; the sidecar is this test binary re-executed
// in namespace B (helper mode "sidecar"), so its UDP socket exists only
// there; a veth pair joins the two. Kernel sockets behind the daemon's
// TUN and the sidecar's netstack move a checksummed TCP stream each way,
// and the veth must carry nothing but ESP.
func TestSidecar(t *testing.T) {
	const n = 4 << 20
	for _, tt := range []struct {
		name      string
		transport bool
		suite     string
	}{
		{"tunnel/aes-gcm-128", false, "aes-gcm-128"},
		{"tunnel/chacha20-poly1305", false, "chacha20-poly1305"},
		{"transport/aes-gcm-128", true, "aes-gcm-128"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newPair(t)
			var daemonCfg, sidecarCfg string
			// daemonAddr is the kernel's address behind the daemon's TUN
			// (what the sidecar dials); sidecarAddr the netstack's.
			var daemonAddr, sidecarAddr string
			var d *daemon
			if tt.transport {
				keys := map[string][]byte{}
				for _, spi := range []int{0x1001, 0x1002, 0x2001, 0x2002} {
					keys[fmt.Sprint(spi)] = randomKey(suiteByName(tt.suite).keyLen)
				}
				spec := transportSpec{suite: suiteByName(tt.suite)}
				daemonCfg = spec.side(underlayA4, underlayB4, underlayA6, underlayB6, 0x1001, 0x2001, keys)
				// In transport mode the netstack holds the underlay
				// address itself: the SAs protect traffic between the
				// two ends' own addresses.
				// The netstack's ESP cannot loop back into a TUN, so it
				// takes no mark (stackfile.New refuses one).
				sidecarCfg = strings.NewReplacer(
					"    mtu: 1400\n", fmt.Sprintf("    mtu: 1400\n    addresses: [%s/24, %s/64]\n", underlayB4, underlayB6),
					"  mark: "+underlayMark+"\n", "",
				).Replace(spec.side(underlayB4, underlayA4, underlayB6, underlayA6, 0x2001, 0x1001, keys))
				daemonAddr, sidecarAddr = underlayA4, underlayB4
				d = startDaemon(t, p.a, daemonCfg)
				steerIntoTUN(t, p.a, "ipsec1", underlayA4, underlayB4, underlayA6, underlayB6)
			} else {
				spec := tunnelSpec{suite: suiteByName(tt.suite), esn: true}
				daemonCfg, sidecarCfg = spec.configs()
				daemonAddr, sidecarAddr = innerA4, innerB4
				d = startDaemon(t, p.a, daemonCfg)
			}
			if strings.Contains(sidecarCfg, "mode: transport") != tt.transport {
				t.Fatalf("sidecar config is not in the mode under test:\n%s", sidecarCfg)
			}
			dir := t.TempDir()
			cfgPath := filepath.Join(dir, "sidecar.yaml")
			sidecarCfg += "\nstate_dir: " + filepath.Join(dir, "state") + "\n" // its own, not /var/lib/ipsecd
			if err := os.WriteFile(cfgPath, []byte(sidecarCfg), 0o600); err != nil {
				t.Fatal(err)
			}

			stopCapture := capture(t, p.a, "veth0")
			stopSidecar := sidecarStreams(t, p, cfgPath, daemonAddr, sidecarAddr, n)
			// The capture ends while the sidecar still holds its UDP
			// socket: a late ACK to a closed port would draw an ICMP
			// error, which is not what this test looks for.
			esp, espBytes, clear := classifyCapture(stopCapture())
			stopSidecar()
			if len(clear) != 0 {
				t.Errorf("veth0 carried %d packets that are not ESP, first: %s", len(clear), clear[0])
			}
			if espBytes < 2*n {
				t.Errorf("veth0 carried %d ESP packets of %d bytes, want at least the %d bytes sent", esp, espBytes, 2*n)
			}

			st := d.stats()
			for _, c := range []string{"XfrmInError", "XfrmInNoStates", "XfrmInStateProtoError", "XfrmInStateModeError", "XfrmInStateSeqError", "XfrmOutError"} {
				if st[c] != 0 {
					t.Errorf("daemon: %s = %d, want 0", c, st[c])
				}
			}
			// The streams are IPv4: the daemon's IPv4 SAs carried them.
			for _, spi := range []int{0x1001, 0x2001} {
				dir := map[int]string{0x1001: "out", 0x2001: "in"}[spi]
				if s := d.state(spi, dir); s.Stats.Packets == 0 {
					t.Errorf("daemon SA 0x%x %s carried no packets", spi, dir)
				}
			}
		})
	}
}

// sidecarStreams runs the sidecar helper in p.b with the config at cfgPath
// and moves n checksummed bytes each way: from a kernel socket in p.a
// (behind the daemon's TUN) to the sidecar's netstack, then back. The
// sidecar keeps running until stop is called (the test's end at the
// latest), which checks that it then exits cleanly.
func sidecarStreams(t *testing.T, p *pair, cfgPath, daemonAddr, sidecarAddr string, n int64) (stop func()) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	t.Cleanup(cancel)
	toDaemon := net.JoinHostPort(daemonAddr, "5202")
	toSidecar := net.JoinHostPort(sidecarAddr, "5201")

	// The kernel's sink behind the daemon, for the sidecar → daemon stream.
	sinkLines, sinkErr, stopSink := startTCPSink(t, ctx, p.a, self, toDaemon)
	defer stopSink()

	seed := uint64(time.Now().UnixNano())
	side := p.b.cmd(ctx, self, cfgPath, toDaemon, fmt.Sprint(n), fmt.Sprint(seed+1))
	side.Env = append(os.Environ(), helperEnv+"=sidecar")
	sideIn, err := side.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	sideOut, err := side.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var sideErr syncbuf.Buffer
	side.Stderr = &sideErr
	if err := side.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait closes the stdout pipe once the process has exited; the
	// sidecar exits only after "done" and stdin's close, or on an error
	// (which it tells on stderr).
	sideDone := make(chan error, 1)
	go func() { sideDone <- side.Wait() }()
	t.Cleanup(func() {
		side.Process.Kill()
		err := <-sideDone
		sideDone <- err
		if t.Failed() {
			t.Logf("sidecar stderr:\n%s", sideErr.String())
		}
	})
	sideLines := bufio.NewScanner(sideOut)
	next := func(what string) string {
		if !sideLines.Scan() {
			t.Fatalf("sidecar in %s ended before %s: %s", p.b.name, what, sideErr.String())
		}
		return sideLines.Text()
	}
	if line := next("listening"); line != "listening" {
		t.Fatalf("sidecar said %q, want listening", line)
	}

	// daemon side → sidecar.
	source := p.a.cmd(ctx, self, toSidecar, fmt.Sprint(n), fmt.Sprint(seed))
	source.Env = append(os.Environ(), helperEnv+"=tcp-source")
	sent, err := source.CombinedOutput()
	if err != nil {
		t.Fatalf("tcp source %s → sidecar %s: %v\n%s", p.a.name, toSidecar, err, sent)
	}
	if got, want := next("its digest"), "sink "+strings.TrimSpace(string(sent)); got != want {
		t.Fatalf("daemon side → sidecar: sidecar got %q, sent %q", got, want)
	}

	// sidecar → daemon side.
	line := next("its sent digest")
	if !sinkLines.Scan() {
		t.Fatalf("tcp sink in %s printed no digest: %s", p.a.name, sinkErr.String())
	}
	if got, want := "source "+sinkLines.Text(), line; got != want {
		t.Fatalf("sidecar → daemon side: far end got %q, sidecar sent %q", got, want)
	}
	if want := fmt.Sprintf(" %d", n); !strings.HasSuffix(line, want) {
		t.Fatalf("sidecar sent %q, want %d bytes", line, n)
	}

	// The sidecar's own SAs: each carried traffic, none failed.
	var sas int
	for sideLines.Scan() && sideLines.Text() != "done" {
		var dir, spi string
		var packets, bytes, failed uint64
		if _, err := fmt.Sscanf(sideLines.Text(), "sa %s %s %d %d %d", &dir, &spi, &packets, &bytes, &failed); err != nil {
			continue
		}
		if strings.HasSuffix(spi, "1001") || strings.HasSuffix(spi, "2001") { // the IPv4 pair
			sas++
			if packets == 0 || failed != 0 {
				t.Errorf("sidecar SA %s %s: %d packets, %d integrity failures; want traffic and none", dir, spi, packets, failed)
			}
		}
	}
	if sas != 2 {
		t.Errorf("sidecar reported %d IPv4 SAs, want 2", sas)
	}
	return func() {
		t.Helper()
		sideIn.Close()
		select {
		case err := <-sideDone:
			sideDone <- err
			if err != nil {
				t.Errorf("sidecar: %v\n%s", err, sideErr.String())
			}
		case <-time.After(15 * time.Second):
			t.Errorf("sidecar did not exit within 15 s of its stdin closing")
		}
	}
}

// sidecarHelper is helper mode "sidecar CONFIG PEER N SEED": a stack.Net
// from the daemon-format config file CONFIG, in the namespace the helper
// was started in. It listens on TCP port 5201 of the netstack and prints
// "listening"; takes one connection and prints "sink SHA256 COUNT" of what
// arrived; then dials PEER through the netstack, sends N pseudo-random
// bytes (seed SEED), and prints "source SHA256 COUNT"; then one line
// "sa DIR SPI PACKETS BYTES INTEGRITY-FAILED" per SA and "done"; then it
// keeps its socket until stdin closes (60 s at most).
func sidecarHelper(args []string) error {
	if len(args) != 4 {
		return fmt.Errorf("want CONFIG PEER N SEED, got %q", args)
	}
	n, err := strconv.ParseInt(args[2], 10, 64)
	if err != nil {
		return fmt.Errorf("N: %w", err)
	}
	seed, err := strconv.ParseUint(args[3], 10, 64)
	if err != nil {
		return fmt.Errorf("SEED: %w", err)
	}
	cfg, err := config.Load(args[0])
	if err != nil {
		return err
	}
	tnet, err := stackfile.New(cfg)
	if err != nil {
		return err
	}
	defer tnet.Close()

	ln, err := tnet.ListenTCP(&net.TCPAddr{Port: 5201})
	if err != nil {
		return err
	}
	fmt.Println("listening")
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	var c net.Conn
	select {
	case c = <-accepted:
	case <-time.After(60 * time.Second):
	}
	ln.Close()
	if c == nil {
		return errors.New("no connection within 60 s")
	}
	c.SetDeadline(time.Now().Add(120 * time.Second))
	h := sha256.New()
	got, err := io.Copy(h, c)
	c.Close()
	if err != nil {
		return fmt.Errorf("receiving: %w", err)
	}
	fmt.Printf("sink %s %d\n", hex.EncodeToString(h.Sum(nil)), got)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	c, err = tnet.DialContext(ctx, "tcp", args[1])
	cancel()
	if err != nil {
		return err
	}
	c.SetDeadline(time.Now().Add(120 * time.Second))
	h = sha256.New()
	sent, err := io.Copy(io.MultiWriter(c, h), io.LimitReader(rand.NewChaCha8(seedBytes(seed)), n))
	if err != nil {
		return fmt.Errorf("sending: %w", err)
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		if err := cw.CloseWrite(); err != nil {
			return err
		}
		io.Copy(io.Discard, c) // until the far end closes: all was acknowledged
	}
	c.Close()
	fmt.Printf("source %s %d\n", hex.EncodeToString(h.Sum(nil)), sent)

	for _, s := range tnet.SAD().States() {
		st := s.Stats()
		fmt.Printf("sa %s 0x%08x %d %d %d\n", s.Dir(), s.SPI(), st.Packets, st.Bytes, st.IntegrityFailed)
	}
	fmt.Println("done")
	stdinClosed := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(stdinClosed) }()
	select {
	case <-stdinClosed:
	case <-time.After(60 * time.Second):
	}
	return nil
}
