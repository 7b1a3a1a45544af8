//go:build linux

package integration

import (
	"context"
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
	cmd := exec.CommandContext(ctx, ipsecdBin, append([]string{"demo"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("ipsecd demo %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	checkNoDemoNamespaces(t, cmd)
	return string(out)
}

// checkNoDemoNamespaces fails t if the demo that cmd ran left its
// namespaces (ipsecd-demo-a-PID, ipsecd-demo-b-PID) behind. Only its own:
// other packages' tests may run a demo at the same time.
func checkNoDemoNamespaces(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if cmd.Process == nil {
		return
	}
	ns, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	tag := "-" + strconv.Itoa(cmd.Process.Pid)
	for _, name := range []string{"ipsecd-demo-a" + tag, "ipsecd-demo-b" + tag} {
		if strings.Contains(string(ns), name+" ") || strings.Contains(string(ns), name+"\n") {
			t.Errorf("demo left namespace %s behind:\n%s", name, ns)
		}
	}
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

// TestDemo, the IKE demo as root, is in cmd/ipsecd (TestDemoNamespaces),
// beside the netstack demo's test, which checks the same output.

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
	cmd := exec.CommandContext(ctx, "setpriv", "--bounding-set", "-sys_admin,-net_admin", ipsecdBin, "demo", "--mib", "1")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("ipsecd demo without CAP_SYS_ADMIN: %v, want exit status 1\n%s", err, out)
	}
	for _, want := range []string{"CAP_SYS_ADMIN", "--netstack"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	checkNoDemoNamespaces(t, cmd) // setpriv execs ipsecd: the same pid
}
