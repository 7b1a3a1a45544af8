package integration

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"
)

// ping sends count echo requests from ns to dst and fails the test unless
// every one is answered.
func ping(t *testing.T, ns *netns, dst string, count int) {
	t.Helper()
	out, err := ns.run("ping", "-n", "-q", "-c", fmt.Sprint(count), "-i", "0.2", "-w", "15", dst)
	want := fmt.Sprintf("%d received", count)
	if err != nil || !strings.Contains(out, want) {
		t.Fatalf("ping %s from %s: want %q, got err %v:\n%s", dst, ns.name, want, err, out)
	}
}

// tcpTransfer sends n pseudo-random bytes over TCP from src to dst (an
// address of dstNS) and fails unless the far end got exactly those bytes,
// compared by SHA-256.
func tcpTransfer(t *testing.T, srcNS, dstNS *netns, dst string, n int64) time.Duration {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	addr := netip.AddrPortFrom(netip.MustParseAddr(dst), 5201).String()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()

	sink := dstNS.cmd(ctx, self, addr)
	sink.Env = append(os.Environ(), helperEnv+"=tcp-sink")
	stdout, err := sink.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var sinkErr syncBuffer
	sink.Stderr = &sinkErr
	if err := sink.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sink.Process.Kill(); sink.Wait() }()
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "listening" {
		t.Fatalf("tcp sink in %s did not start: %s", dstNS.name, sinkErr.String())
	}

	start := time.Now()
	source := srcNS.cmd(ctx, self, addr, fmt.Sprint(n), fmt.Sprint(time.Now().UnixNano()))
	source.Env = append(os.Environ(), helperEnv+"=tcp-source")
	sent, err := source.CombinedOutput()
	if err != nil {
		t.Fatalf("tcp source %s → %s: %v\n%s", srcNS.name, addr, err, sent)
	}
	elapsed := time.Since(start)
	if !lines.Scan() {
		t.Fatalf("tcp sink in %s printed no digest: %s", dstNS.name, sinkErr.String())
	}
	got, want := lines.Text(), strings.TrimSpace(string(sent))
	if got != want {
		t.Fatalf("tcp %s → %s: far end got %q, sent %q", srcNS.name, addr, got, want)
	}
	if wantSuffix := fmt.Sprintf(" %d", n); !strings.HasSuffix(got, wantSuffix) {
		t.Fatalf("tcp %s → %s: far end got %q, want %d bytes", srcNS.name, addr, got, n)
	}
	return elapsed
}

// capture runs tcpdump on dev in ns until stop is called, and returns what
// it printed (with -X, packet bytes as hex and ASCII).
func capture(t *testing.T, ns *netns, dev string, filter ...string) (stop func() string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	// --immediate-mode: without it libpcap hands packets over in blocks
	// retired every second, and those of the last second before stop are
	// lost ("received by filter" but not printed).
	args := append([]string{"-i", dev, "-n", "-U", "-l", "--immediate-mode", "-X", "-s", "0"}, filter...)
	cmd := ns.cmd(ctx, "tcpdump", args...)
	var out, errOut syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	// Wait until tcpdump says it listens, so no packet is missed.
	for i := 0; i < 100 && !strings.Contains(errOut.String(), "listening on"); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	var stopped bool
	stop = func() string {
		if !stopped {
			stopped = true
			time.Sleep(200 * time.Millisecond)
			cmd.Process.Signal(os.Interrupt)
			cmd.Wait()
			cancel()
		}
		return out.String()
	}
	t.Cleanup(func() { stop() })
	return stop
}
