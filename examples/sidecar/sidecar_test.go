// Package sidecar holds the test of the sidecar example: the server and
// client programs in ./server and ./client, built and run against each
// other with the config files of this directory.
package sidecar

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/config"
)

// TestExample builds the two programs, starts the server with server.yaml
// and runs the client with client.yaml: the body the server wrote must
// arrive, and both ends must count ESP packets on all their SAs. Only the
// UDP port is changed (to one that is free on 127.0.0.1 and 127.0.0.2),
// so that the test does not depend on port 4500 being unused, and the
// keys are fresh ones from examples/genkeys.sh, as the README has the
// user make them (the examples ship none). No root needed: that is the
// point of the sidecar.
func TestExample(t *testing.T) {
	dir := t.TempDir()
	for _, prog := range []string{"server", "client", "../../cmd/ipsecd"} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, filepath.Base(prog)), "./"+prog).CombinedOutput()
		if err != nil {
			t.Fatalf("go build ./%s: %v\n%s", prog, err, out)
		}
	}
	// The configs go to ROOT/sidecar, as in examples/, so that
	// genkeys.sh ROOT puts their keys where their key_file entries say.
	root := filepath.Join(dir, "examples")
	cfgDir := filepath.Join(root, "sidecar")
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	gen := exec.Command("bash", "../genkeys.sh", root, "sidecar/keys/server-to-client.key", "sidecar/keys/client-to-server.key")
	gen.Env = append(os.Environ(), "IPSECD="+filepath.Join(dir, "ipsecd"))
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("examples/genkeys.sh: %v\n%s", err, out)
	}
	port := freeLoopbackPort(t)
	serverCfg := withPort(t, "server.yaml", cfgDir, port)
	clientCfg := withPort(t, "client.yaml", cfgDir, port)
	for _, f := range []string{serverCfg, clientCfg} {
		cfg, err := config.Load(f)
		if err != nil {
			t.Fatalf("shipped config: %v", err)
		}
		if len(cfg.Warnings) != 0 {
			t.Errorf("%s: warnings %q, want none", f, cfg.Warnings)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	server := exec.CommandContext(ctx, filepath.Join(dir, "server"), "--config", serverCfg, "--port", "8080")
	server.Stderr = os.Stderr
	serverOut, err := server.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	serverDone := make(chan struct{})
	var serverLines []string
	ready := make(chan string, 1)
	go func() {
		defer close(serverDone)
		sc := bufio.NewScanner(serverOut)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "serving ") {
				ready <- sc.Text()
			}
			serverLines = append(serverLines, sc.Text())
		}
	}()
	// The server is killed on every path out of the test; on success it
	// is stopped with SIGTERM first, so that it prints its counters.
	defer server.Process.Kill()

	select {
	case line := <-ready:
		if !strings.Contains(line, "198.51.100.1:8080") {
			t.Errorf("server says %q, want it to serve on 198.51.100.1:8080", line)
		}
	case <-serverDone:
		t.Fatalf("server exited before serving: %v", server.Wait())
	case <-time.After(30 * time.Second):
		t.Fatal("server did not print its serving line within 30 s")
	}

	out, err := exec.CommandContext(ctx, filepath.Join(dir, "client"),
		"--config", clientCfg, "--url", "http://198.51.100.1:8080/", "--timeout", "20s").CombinedOutput()
	if err != nil {
		t.Fatalf("client: %v\n%s", err, out)
	}
	text := string(out)
	// The body names the client's inner address as the server saw it: the
	// connection came out of the tunnel, not from the host's loopback.
	if !regexp.MustCompile(`hello 203\.0\.113\.1:\d+, this is 198\.51\.100\.1:8080: your request and this answer crossed ESP`).MatchString(text) {
		t.Errorf("client output lacks the server's body:\n%s", text)
	}
	checkSAs(t, "client", text)

	if err := server.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-serverDone:
	case <-time.After(15 * time.Second):
		t.Fatal("server did not stop within 15 s of SIGTERM")
	}
	if err := server.Wait(); err != nil {
		t.Errorf("server: %v", err)
	}
	checkSAs(t, "server", strings.Join(serverLines, "\n"))
}

var saLine = regexp.MustCompile(`(?m)^SA (out|in) +spi 0x([0-9a-f]+) \S+ → \S+: (\d+) packets, (\d+) bytes, integrity-failed (\d+)$`)

// checkSAs wants one outbound and one inbound SA in a program's output,
// each with packets and bytes counted and no integrity failure, and no
// xfrm error counter.
func checkSAs(t *testing.T, who, text string) {
	t.Helper()
	seen := map[string]bool{}
	for _, m := range saLine.FindAllStringSubmatch(text, -1) {
		seen[m[1]] = true
		packets, _ := strconv.Atoi(m[3])
		bytes, _ := strconv.Atoi(m[4])
		if packets == 0 || bytes == 0 {
			t.Errorf("%s: SA %s spi 0x%s counted %d packets, %d bytes: want traffic", who, m[1], m[2], packets, bytes)
		}
		if m[5] != "0" {
			t.Errorf("%s: SA %s spi 0x%s: integrity-failed %s, want 0", who, m[1], m[2], m[5])
		}
	}
	if !seen["out"] || !seen["in"] {
		t.Errorf("%s printed SAs %v, want out and in:\n%s", who, seen, text)
	}
	if bad := regexp.MustCompile(`Xfrm\w*Error|XfrmInNoStates`).FindString(text); bad != "" {
		t.Errorf("%s counted %s:\n%s", who, bad, text)
	}
}

// withPort copies the shipped config name into dir with its UDP port 4500
// (underlay and encap) replaced by port.
func withPort(t *testing.T, name, dir string, port int) string {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`\b4500\b`)
	// The underlay, and sport and dport of two states.
	if n := len(re.FindAllIndex(data, -1)); n != 5 {
		t.Fatalf("%s mentions port 4500 %d times, want 5 (underlay and two encaps): update the test", name, n)
	}
	data = re.ReplaceAll(data, []byte(strconv.Itoa(port)))
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// freeLoopbackPort returns a UDP port that is free on both 127.0.0.1 and
// 127.0.0.2 at the time of the call.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	for range 20 {
		a, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		port := a.LocalAddr().(*net.UDPAddr).Port
		b, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2), Port: port})
		a.Close()
		if err == nil {
			b.Close()
			return port
		}
	}
	t.Fatal("no UDP port free on both 127.0.0.1 and 127.0.0.2 in 20 tries")
	return 0
}
