//go:build linux

package integration

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// runDemo runs `ipsecd demo ARGS...` (bounded to two minutes) and
// returns what it printed; it fails the test if the demo failed or left a
// namespace behind.
func runDemo(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, ipsecdBin, append([]string{"demo"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ipsecd demo %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	ns, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(ns), "ipsecd-demo-") {
		t.Errorf("demo left namespaces behind:\n%s", ns)
	}
	return string(out)
}

// checkDemoTransfers wants two checked transfers, each announced before
// it starts, and no drop counted.
func checkDemoTransfers(t *testing.T, text string, mib int) {
	t.Helper()
	if got := strings.Count(text, "SHA-256 equal at both ends"); got != 2 {
		t.Errorf("demo reported %d checked transfers, want 2:\n%s", got, text)
	}
	for _, want := range []string{"TCP A → B: sending " + strconv.Itoa(mib) + " MiB ...", "TCP B → A: sending " + strconv.Itoa(mib) + " MiB ..."} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks the progress line %q:\n%s", want, text)
		}
	}
	if bad := regexp.MustCompile(`integrity-failed [1-9]|(?m)^  Xfrm\w+\t[1-9]`).FindString(text); bad != "" {
		t.Errorf("demo output shows %q:\n%s", bad, text)
	}
}

// demoSPIs matches the demo's summary of the SPIs before and after the
// rekeys: the IKE SA's pair and the child's.
var (
	demoIKESPIs   = regexp.MustCompile(`(?m)^  IKE SA ([0-9a-f]{16})_i ([0-9a-f]{16})_r → ([0-9a-f]{16})_i ([0-9a-f]{16})_r$`)
	demoChildSPIs = regexp.MustCompile(`(?m)^  child  (0x[0-9a-f]+)_i (0x[0-9a-f]+)_o → (0x[0-9a-f]+)_i (0x[0-9a-f]+)_o$`)
	demoPSKFile   = regexp.MustCompile(`pre-shared key made for this run \((/\S+), mode 0600`)
)

// TestDemo runs the README's main job, `ipsecd demo`, with a small
// transfer: two daemons that negotiate their keys with IKEv2, a
// checksummed TCP stream each way, the child and the IKE SA rekeyed in
// the middle of the streams; it must say what it waits for as it goes,
// show new SPIs after the rekeys and nothing lost, and leave no
// namespace and no pre-shared key behind.
func TestDemo(t *testing.T) {
	text := runDemo(t, "--mib", "16")
	checkDemoTransfers(t, text, 16)
	for _, want := range []string{
		"negotiating their keys with IKEv2",
		"IKE SA aes128gcm16-prfsha256-x25519",
		"child ESP aes128gcm16-x25519",
		"endpoint A (ipsecd ike list), before the rekeys:",
		"endpoint A (ipsecd ike list), after the rekeys:",
		"endpoint B (ipsecd stats, non-zero)",
		"IpsecdUnderlayRxPackets",
		"0 lost: both streams arrived whole",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks %q:\n%s", want, text)
		}
	}
	// Progress: each wait is named before it starts and timed when done.
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`waiting for the two daemons to answer on their control sockets \.\.\. up in \d`),
		regexp.MustCompile(`waiting for the IKE SA and its child \.\.\. up in \d`),
		regexp.MustCompile(`rekeying the child from A in the middle of the stream \(\d+ of 16 MiB sent\) \.\.\. done in \d`),
		regexp.MustCompile(`rekeying the IKE SA from A in the middle of the stream \(\d+ of 16 MiB sent\) \.\.\. done in \d`),
		regexp.MustCompile(`rekeying the child from B in the middle of the stream \(\d+ of 16 MiB sent\) \.\.\. done in \d`),
	} {
		if !want.MatchString(text) {
			t.Errorf("demo output lacks a line matching %q:\n%s", want, text)
		}
	}
	// The rekeys happened while the stream ran: the A → B transfer ends
	// after both of its rekeys.
	if i, j := strings.Index(text, "rekeying the IKE SA from A"), strings.Index(text, "TCP A 198.51.100.1 → B"); i < 0 || j < i {
		t.Errorf("the IKE rekey is not reported within the A → B stream:\n%s", text)
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
	// The ike list before and after shows these SAs.
	for _, spi := range []string{ike[1] + "_i*", ike[3] + "_i*", "SPIs: " + child[1] + "_i " + child[2] + "_o", "SPIs: " + child[3] + "_i " + child[4] + "_o"} {
		if !strings.Contains(text, spi) {
			t.Errorf("ike list output lacks %q:\n%s", spi, text)
		}
	}
	m := demoPSKFile.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("demo output does not name its pre-shared key file:\n%s", text)
	}
	if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
		t.Errorf("pre-shared key %s after the demo: %v, want it removed", m[1], err)
	}
}

// TestDemoStatic runs `ipsecd demo --static`, the demo as it was before
// IKE: two daemons with static keys from their configs.
func TestDemoStatic(t *testing.T) {
	text := runDemo(t, "--static", "--mib", "16")
	checkDemoTransfers(t, text, 16)
	for _, want := range []string{"with static keys from their configs", "endpoint A (ipsecd state list)", "endpoint B (ipsecd stats, non-zero)", "IpsecdUnderlayRxPackets"} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "IKE") {
		t.Errorf("demo --static mentions IKE:\n%s", text)
	}
}

// TestDemoNamesMissingPrivilege: root without CAP_SYS_ADMIN and
// CAP_NET_ADMIN (as in a container) cannot make the namespaces; the demo
// says which capabilities it lacks and what to run instead, and exits 1.
func TestDemoNamesMissingPrivilege(t *testing.T) {
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("needs setpriv (util-linux)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "setpriv", "--bounding-set", "-sys_admin,-net_admin", ipsecdBin, "demo", "--mib", "1").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("ipsecd demo without CAP_SYS_ADMIN: %v, want exit status 1\n%s", err, out)
	}
	for _, want := range []string{"CAP_SYS_ADMIN", "--netstack"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	if ns, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(ns), "ipsecd-demo-") {
		t.Errorf("demo left namespaces behind:\n%s", ns)
	}
}
