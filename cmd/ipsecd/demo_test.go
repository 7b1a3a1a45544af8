package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// demoSA is one SA line of the demo's report.
type demoSA struct {
	endpoint, dir, spi      string
	packets, bytes          uint64
	replay, integrityFailed uint64
}

var (
	demoEndpointLine = regexp.MustCompile(`^endpoint ([AB]) \(SAs`)
	demoIfLine       = regexp.MustCompile(`(?m)^  rx (\d+) packets, \d+ bytes, (\d+) errors, \d+ drops; tx (\d+) packets, \d+ bytes, (\d+) errors, \d+ drops$`)
	demoSALine       = regexp.MustCompile(`^  (out|in) +spi (0x[0-9a-f]+) \S+ → \S+  (\d+) packets, (\d+) bytes, replay (\d+), integrity-failed (\d+)$`)
)

// parseDemoSAs returns the SA lines of the netstack demo's report.
func parseDemoSAs(text string) []demoSA {
	var sas []demoSA
	endpoint := ""
	for _, line := range strings.Split(text, "\n") {
		if m := demoEndpointLine.FindStringSubmatch(line); m != nil {
			endpoint = m[1]
			continue
		}
		m := demoSALine.FindStringSubmatch(line)
		if m == nil || endpoint == "" {
			continue
		}
		n := func(s string) uint64 { v, _ := strconv.ParseUint(s, 10, 64); return v }
		sas = append(sas, demoSA{endpoint: endpoint, dir: m[1], spi: m[2],
			packets: n(m[3]), bytes: n(m[4]), replay: n(m[5]), integrityFailed: n(m[6])})
	}
	return sas
}

// checkDemoOutput wants what a successful netstack demo prints: two
// transfers whose digests matched, all four SAs (A and B, out and in)
// carrying at least the bytes sent, each inbound SA having accepted no more
// than its peer's outbound SA sent, and no drop counted anywhere.
func checkDemoOutput(t *testing.T, text string, mib int) {
	t.Helper()
	if got := strings.Count(text, "SHA-256 equal at both ends"); got != 2 {
		t.Errorf("demo reported %d checked transfers, want 2:\n%s", got, text)
	}
	// Each transfer is announced before it starts.
	for _, want := range []string{"TCP A → B: sending " + strconv.Itoa(mib) + " MiB ...", "TCP B → A: sending " + strconv.Itoa(mib) + " MiB ..."} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks the progress line %q:\n%s", want, text)
		}
	}
	sas := parseDemoSAs(text)
	if len(sas) != 4 {
		t.Fatalf("demo reported %d SAs, want 4 (out and in at A and B):\n%s", len(sas), text)
	}
	out := map[string]demoSA{} // by SPI
	for _, s := range sas {
		if s.dir == "out" {
			out[s.spi] = s
		}
	}
	for _, s := range sas {
		// Each SA carries one stream's data one way and the other
		// stream's ACKs: at least the stream's bytes.
		if s.bytes < uint64(mib)<<20 || s.packets == 0 {
			t.Errorf("endpoint %s SA %s %s: %d packets, %d bytes, want at least %d MiB", s.endpoint, s.dir, s.spi, s.packets, s.bytes, mib)
		}
		if s.replay != 0 || s.integrityFailed != 0 {
			t.Errorf("endpoint %s SA %s %s: replay %d, integrity-failed %d, want 0", s.endpoint, s.dir, s.spi, s.replay, s.integrityFailed)
		}
		if s.dir == "in" {
			peer, ok := out[s.spi]
			if !ok || peer.endpoint == s.endpoint {
				t.Errorf("endpoint %s SA in %s has no outbound twin at the other endpoint", s.endpoint, s.spi)
			} else if s.packets > peer.packets {
				t.Errorf("endpoint %s SA in %s accepted %d packets, but %s sent only %d", s.endpoint, s.spi, s.packets, peer.endpoint, peer.packets)
			}
		}
	}
	// Each endpoint's interface counted the packets both ways, no errors.
	ifLines := demoIfLine.FindAllStringSubmatch(text, -1)
	if len(ifLines) != 2 {
		t.Errorf("demo reported %d interface lines, want 2:\n%s", len(ifLines), text)
	}
	for _, m := range ifLines {
		if m[1] == "0" || m[3] == "0" || m[2] != "0" || m[4] != "0" {
			t.Errorf("interface counters %q: want packets both ways and no errors", m[0])
		}
	}
	if bad := regexp.MustCompile(`Xfrm\w*Error|XfrmInNoStates|XfrmOutNoStates|XfrmInStateSeqError`).FindString(text); bad != "" {
		t.Errorf("demo output shows %q:\n%s", bad, text)
	}
}

// demoSPIs matches the IKE demo's summary of the SPIs before and after
// the rekeys: the IKE SA's pair and the child's.
var (
	demoIKESPIs   = regexp.MustCompile(`(?m)^  IKE SA ([0-9a-f]{16})_i ([0-9a-f]{16})_r → ([0-9a-f]{16})_i ([0-9a-f]{16})_r$`)
	demoChildSPIs = regexp.MustCompile(`(?m)^  child  (0x[0-9a-f]+)_i (0x[0-9a-f]+)_o → (0x[0-9a-f]+)_i (0x[0-9a-f]+)_o$`)
)

// checkIKEDemoOutput wants what a successful IKE demo prints: each wait
// named before it starts and timed when done, the rekeys in the middle
// of the streams, two transfers whose digests matched, ike list before
// and after, new SPIs after the rekeys, and 0 lost.
func checkIKEDemoOutput(t *testing.T, text string, mib int) {
	t.Helper()
	if got := strings.Count(text, "SHA-256 equal at both ends"); got != 2 {
		t.Errorf("demo reported %d checked transfers, want 2:\n%s", got, text)
	}
	m := strconv.Itoa(mib)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`waiting for the IKE SA and its child \.\.\. up in \d`),
		regexp.MustCompile(`TCP A → B: sending ` + m + ` MiB \.\.\.\n  rekeying the child from A in the middle of the stream \(\d+ of ` + m + ` MiB sent\) \.\.\. done in \d`),
		regexp.MustCompile(`rekeying the IKE SA from A in the middle of the stream \(\d+ of ` + m + ` MiB sent\) \.\.\. done in \d.*\nTCP A 198\.51\.100\.1 → B`),
		regexp.MustCompile(`TCP B → A: sending ` + m + ` MiB \.\.\.\n  rekeying the child from B in the middle of the stream \(\d+ of ` + m + ` MiB sent\) \.\.\. done in \d.*\nTCP B 203\.0\.113\.1 → A`),
	} {
		if !want.MatchString(text) {
			t.Errorf("demo output lacks a line matching %q:\n%s", want, text)
		}
	}
	for _, want := range []string{
		"IKE SA aes128gcm16-prfsha256-x25519",
		"child ESP aes128gcm16-x25519",
		"endpoint A (ipsecd ike list), before the rekeys:",
		"endpoint A (ipsecd ike list), after the rekeys:",
		"0 lost: both streams arrived whole",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks %q:\n%s", want, text)
		}
	}
	ike := demoIKESPIs.FindStringSubmatch(text)
	child := demoChildSPIs.FindStringSubmatch(text)
	if ike == nil || child == nil {
		t.Fatalf("demo output lacks the SPIs before and after:\n%s", text)
	}
	if ike[1] == ike[3] || ike[2] == ike[4] {
		t.Errorf("IKE SA SPIs %s %s before, %s %s after: want both new", ike[1], ike[2], ike[3], ike[4])
	}
	if child[1] == child[3] || child[2] == child[4] {
		t.Errorf("child SPIs %s %s before, %s %s after: want both new", child[1], child[2], child[3], child[4])
	}
	for _, spi := range []string{ike[1] + "_i*", ike[3] + "_i*", "SPIs: " + child[1] + "_i " + child[2] + "_o", "SPIs: " + child[3] + "_i " + child[4] + "_o"} {
		if !strings.Contains(text, spi) {
			t.Errorf("ike list output lacks %q:\n%s", spi, text)
		}
	}
	if bad := regexp.MustCompile(`(?m)^  Xfrm\w+\t[1-9]`).FindString(text); bad != "" {
		t.Errorf("demo output shows %q:\n%s", bad, text)
	}
}

// TestDemoNetstack runs `ipsecd demo --netstack --mib 8`: two sidecar
// netstacks in one process that negotiate with IKEv2 over loopback, a
// checksummed TCP stream each way across the child and IKE rekeys.
func TestDemoNetstack(t *testing.T) {
	bin := ipsecdBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "demo", "--netstack", "--mib", "8").CombinedOutput()
	if err != nil {
		t.Fatalf("ipsecd demo --netstack: %v\n%s", err, out)
	}
	text := string(out)
	checkIKEDemoOutput(t, text, 8)
	// The two endpoints are netstacks whose IKE and ESP share a loopback
	// port.
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`negotiating their keys with IKEv2 on that same port`),
		regexp.MustCompile(`(?m)^  A: underlay and IKE 127\.\d+\.\d+\.1:4500, netstack 198\.51\.100\.1/24`),
		regexp.MustCompile(`(?m)^  B: underlay and IKE 127\.\d+\.\d+\.2:4500, netstack 203\.0\.113\.1/24`),
	} {
		if !want.MatchString(text) {
			t.Errorf("demo output lacks %q:\n%s", want, text)
		}
	}
}

// requireNamespaces skips the test without root, the ip command or
// /dev/net/tun, which the namespace demos need; asUser names the test
// that runs the demo as a user.
func requireNamespaces(t *testing.T, asUser string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("needs root: the demo makes network namespaces and TUN devices (%s runs it as a user)", asUser)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs the ip command (iproute2)")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skip("needs /dev/net/tun")
	}
}

// TestDemoNamespaces runs the README's main job as root, `ipsecd demo`,
// with a small transfer: two daemons in network namespaces that
// negotiate with IKEv2, a checksummed TCP stream each way, the child and
// the IKE SA rekeyed in the middle of the streams; it must say what it
// waits for as it goes, show new SPIs after the rekeys and nothing lost,
// and leave no namespace and no pre-shared key behind.
func TestDemoNamespaces(t *testing.T) {
	requireNamespaces(t, "TestDemoWithoutRoot")
	bin := ipsecdBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "demo", "--mib", "16")
	out, err := cmd.CombinedOutput()
	// Its own namespaces (PID-tagged): integration's demo tests may run
	// at the same time.
	tag := "-" + strconv.Itoa(cmd.Process.Pid)
	if ns, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(ns), "ipsecd-demo-a"+tag) || strings.Contains(string(ns), "ipsecd-demo-b"+tag) {
		t.Errorf("demo left namespaces ipsecd-demo-[ab]%s behind:\n%s", tag, ns)
	}
	if err != nil {
		t.Fatalf("ipsecd demo: %v\n%s", err, out)
	}
	text := string(out)
	checkIKEDemoOutput(t, text, 16)
	for _, want := range []string{"negotiating their keys with IKEv2", "endpoint B (ipsecd stats, non-zero)", "IpsecdUnderlayRxPackets"} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks %q:\n%s", want, text)
		}
	}
	if want := regexp.MustCompile(`waiting for the two daemons to answer on their control sockets \.\.\. up in \d`); !want.MatchString(text) {
		t.Errorf("demo output lacks a line matching %q:\n%s", want, text)
	}
	m := regexp.MustCompile(`pre-shared key made for this run \((/\S+), mode 0600`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("demo output does not name its pre-shared key file:\n%s", text)
	}
	if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
		t.Errorf("pre-shared key %s after the demo: %v, want it removed", m[1], err)
	}
}

// TestDemoNetstackStatic runs `ipsecd demo --netstack --static --mib 8`:
// the netstack demo as it was before IKE, with static keys.
func TestDemoNetstackStatic(t *testing.T) {
	bin := ipsecdBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "demo", "--netstack", "--static", "--mib", "8").CombinedOutput()
	if err != nil {
		t.Fatalf("ipsecd demo --netstack --static: %v\n%s", err, out)
	}
	checkDemoOutput(t, string(out), 8)
	// The two endpoints really used the loopback underlay.
	for _, want := range []string{"A: underlay 127.0.0.1:", "B: underlay 127.0.0.2:"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "IKE") {
		t.Errorf("demo --netstack --static mentions IKE:\n%s", out)
	}
}

// TestDemoWithoutRoot runs plain `ipsecd demo` as an unprivileged user
// (nobody, when the test runs as root): it must choose the netstack demo
// by itself, say why, and negotiate with IKEv2 as the root demo does.
// asUser is a command of bin with args that runs as nobody when the
// test runs as root (from a copy of bin in a directory anyone may enter,
// removed when the test ends), and as the test's user otherwise.
func asUser(t *testing.T, bin string, args ...string) *exec.Cmd {
	t.Helper()
	if os.Geteuid() != 0 {
		return exec.Command(bin, args...)
	}
	dir, err := os.MkdirTemp("", "ipsecd-demo-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	copyBin := filepath.Join(dir, "ipsecd")
	if err := os.WriteFile(copyBin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(copyBin, args...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	return cmd
}

func TestDemoWithoutRoot(t *testing.T) {
	bin := ipsecdBinary(t)
	cmd := asUser(t, bin, "demo", "--mib", "2")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ipsecd demo as uid %d: %v\n%s", uidOf(cmd), err, out.String())
		}
	case <-time.After(180 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("ipsecd demo did not end within 180 s:\n%s", out.String())
	}
	text := out.String()
	if want := "not root, so no network namespaces or TUN devices: running the demo between two netstacks in one process (--netstack)"; !strings.Contains(text, want) {
		t.Errorf("demo without root lacks %q (why it chose the netstack demo):\n%s", want, text)
	}
	checkIKEDemoOutput(t, text, 2)
}

func uidOf(cmd *exec.Cmd) int {
	if cmd.SysProcAttr != nil && cmd.SysProcAttr.Credential != nil {
		return int(cmd.SysProcAttr.Credential.Uid)
	}
	return os.Geteuid()
}

// TestDemoFlags: a bad size or a stray argument is a usage error (exit 2)
// naming what is wrong, before anything is set up.
func TestDemoFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"demo", "--netstack", "--mib", "0"}, "--mib 0: want 1.."},
		{[]string{"demo", "--netstack", "--mib", "-3"}, "--mib -3: want 1.."},
		{[]string{"demo", "--netstack", "extra"}, `unexpected argument "extra"`},
		{[]string{"demo", "--static", "--mib", "0"}, "--mib 0: want 1.."},
		{[]string{"demo", "--static", "extra"}, `unexpected argument "extra"`},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := execIpsecd(t, tt.args...)
			if code != 2 {
				t.Errorf("exit status %d, want 2\nstdout: %s\nstderr: %s", code, stdout, stderr)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr %q lacks %q", stderr, tt.want)
			}
		})
	}
}

// TestDemoIKEConfig: the IKE demo's embedded config, rendered for A and B
// beside a pre-shared key from demoPSK, passes `ipsecd check`; the key
// file is mode 0600 and holds 32 random bytes as 0x-hex, and each daemon
// gets the state_dir given (the demo's temporary directory), never the
// default /var/lib/ipsecd of a real daemon.
func TestDemoIKEConfig(t *testing.T) {
	dir := t.TempDir()
	psk, err := demoPSK(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(psk)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: mode %v, want 0600", psk, fi.Mode().Perm())
	}
	data, _ := os.ReadFile(psk)
	if !regexp.MustCompile(`^0x[0-9a-f]{64}\n$`).Match(data) {
		t.Errorf("%s holds %d bytes, want 0x and 64 hex digits", psk, len(data))
	}
	if again, err := demoPSK(t.TempDir()); err != nil {
		t.Fatal(err)
	} else if b, _ := os.ReadFile(again); bytes.Equal(b, data) {
		t.Error("two runs made the same pre-shared key")
	}
	for _, e := range []*demoEndpoint{
		{Name: "A", Local: "192.0.2.1", Peer: "192.0.2.2", Port: 4500, Mark: "0x100", Inner: "198.51.100.1", Remote: "203.0.113.0", Net: "198.51.100.0",
			ID: "a.example.net", PeerID: "b.example.net", PSKFile: psk, Control: filepath.Join(dir, "a.sock"), StateDir: filepath.Join(dir, "a-state")},
		{Name: "B", Local: "192.0.2.2", Peer: "192.0.2.1", Port: 4500, Mark: "0x100", Inner: "203.0.113.1", Remote: "198.51.100.0", Net: "203.0.113.0",
			ID: "b.example.net", PeerID: "a.example.net", PSKFile: psk, Control: filepath.Join(dir, "b.sock"), StateDir: filepath.Join(dir, "b-state")},
		// The netstack demo's A: a loopback underlay on 4500, no
		// control socket.
		{Name: "netstack-A", Local: "127.0.0.1", Peer: "127.0.0.2", Port: 4500, Inner: "198.51.100.1", Remote: "203.0.113.0", Net: "198.51.100.0",
			ID: "a.example.net", PeerID: "b.example.net", PSKFile: psk, StateDir: filepath.Join(dir, "n-state")},
	} {
		cfg, err := demoIKEConfig(e)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"state_dir: " + e.StateDir + "\n", "proposals: [aes128gcm16-prfsha256-x25519]", "esp_proposals: [aes128gcm16-x25519]", "secret_file: " + psk} {
			if !strings.Contains(string(cfg), want) {
				t.Errorf("endpoint %s: config lacks %q:\n%s", e.Name, want, cfg)
			}
		}
		if hasControl := strings.Contains(string(cfg), "\ncontrol:"); hasControl != (e.Control != "") {
			t.Errorf("endpoint %s: a control: line %v, want %v:\n%s", e.Name, hasControl, e.Control != "", cfg)
		}
		path := filepath.Join(dir, e.Name+".yaml")
		if err := os.WriteFile(path, cfg, 0o600); err != nil {
			t.Fatal(err)
		}
		if code, stdout, stderr := execIpsecd(t, "check", "--config", path); code != 0 || stderr != "" {
			t.Errorf("endpoint %s: ipsecd check: exit %d\n%s%s\n%s", e.Name, code, stdout, stderr, cfg)
		}
	}
}
