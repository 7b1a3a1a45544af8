//go:build linux

package integration

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/internal/syncbuf"
)

// ping sends echo requests from ns to dst until count are answered (15 s
// at most) and fails the test otherwise. Ping may send more than count: a
// link that just came up can hold the first packets back for a second or
// two (IPv6 neighbour discovery), and they are answered together.
func ping(t *testing.T, ns *netns, dst string, count int) {
	t.Helper()
	out, err := ns.run("ping", "-n", "-q", "-c", fmt.Sprint(count), "-i", "0.2", "-w", "15", dst)
	m := pingReceived.FindStringSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("ping %s from %s: want %d answered, got err %v:\n%s", dst, ns.name, count, err, out)
	}
	if got, _ := strconv.Atoi(m[1]); got < count {
		t.Fatalf("ping %s from %s: %d answered, want %d:\n%s", dst, ns.name, got, count, out)
	}
}

var pingReceived = regexp.MustCompile(`(\d+) received`)

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

	lines, sinkErr, stop := startTCPSink(t, ctx, dstNS, self, addr)
	defer stop()

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

// startTCPSink starts the tcp-sink helper (this test binary) on addr in ns
// and waits until it listens. lines then gives its result line (the
// SHA-256 and count of what arrived), sinkErr its stderr; stop kills it.
func startTCPSink(t *testing.T, ctx context.Context, ns *netns, self, addr string) (lines *bufio.Scanner, sinkErr *syncbuf.Buffer, stop func()) {
	t.Helper()
	sink := ns.cmd(ctx, self, addr)
	sink.Env = append(os.Environ(), helperEnv+"=tcp-sink")
	stdout, err := sink.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	sinkErr = &syncbuf.Buffer{}
	sink.Stderr = sinkErr
	if err := sink.Start(); err != nil {
		t.Fatal(err)
	}
	stop = func() { sink.Process.Kill(); sink.Wait() }
	lines = bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "listening" {
		stop()
		t.Fatalf("tcp sink in %s did not start: %s", ns.name, sinkErr.String())
	}
	return lines, sinkErr, stop
}

// captureFile runs tcpdump -w path on dev in ns until stop is called, which
// returns what tcpdump said on stderr (its counts of packets captured and
// dropped). Packets go to the file with a large buffer while traffic flows:
// printing them live falls behind a fast transfer, and the kernel drops
// what tcpdump cannot take.
func captureFile(t *testing.T, ns *netns, dev, path string, filter ...string) (stop func() string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	// --immediate-mode: without it libpcap hands packets over in blocks
	// retired every second, and those of the last second before stop are
	// lost ("received by filter" but not written).
	args := append([]string{"-i", dev, "-n", "-U", "--immediate-mode", "-B", "65536", "-s", "0", "-w", path}, filter...)
	cmd := ns.cmd(ctx, "tcpdump", args...)
	var errOut syncbuf.Buffer
	cmd.Stderr = &errOut
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
		return errOut.String()
	}
	t.Cleanup(func() { stop() })
	return stop
}

// capture runs tcpdump on dev in ns until stop is called, and returns the
// packets it saw as `tcpdump -n -X` prints them (packet bytes as hex and
// ASCII). stop fails the test if the kernel dropped any, which could hide
// a packet in clear.
func capture(t *testing.T, ns *netns, dev string, filter ...string) (stop func() string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "capture.pcap")
	stopFile := captureFile(t, ns, dev, file, filter...)
	var stopped bool
	var text string
	return func() string {
		if stopped {
			return text
		}
		stopped = true
		said := stopFile()
		if m := captureDropped.FindStringSubmatch(said); m == nil || m[1] != "0" {
			t.Errorf("tcpdump on %s in %s dropped packets or did not say:\n%s", dev, ns.name, said)
		}
		out, err := exec.Command("tcpdump", "-n", "-X", "-r", file).Output()
		if err != nil {
			t.Errorf("reading the capture: %v", err)
		}
		text = string(out)
		return text
	}
}

var captureDropped = regexp.MustCompile(`(\d+) packets dropped by kernel`)
