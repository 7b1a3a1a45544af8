//go:build linux

package integration

import (
	"context"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDemo runs the README's main job, `ipsecd demo`, with a small
// transfer: it must pass traffic both ways, report the counters, and leave
// no namespace behind.
func TestDemo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, ipsecdBin, "demo", "--mib", "16")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("ipsecd demo: %v\n%s", err, out)
	}
	text := string(out)
	if got := strings.Count(text, "SHA-256 equal at both ends"); got != 2 {
		t.Errorf("demo reported %d checked transfers, want 2:\n%s", got, text)
	}
	for _, want := range []string{"endpoint A (ipsecd state list)", "endpoint B (ipsecd stats, non-zero)", "IpsecdUnderlayRxPackets"} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks %q:\n%s", want, text)
		}
	}
	if bad := regexp.MustCompile(`integrity-failed [1-9]|XfrmIn[A-Za-z]*Error|XfrmInNoStates`).FindString(text); bad != "" {
		t.Errorf("demo output shows %q:\n%s", bad, text)
	}
	ns, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(ns), "ipsecd-demo-") {
		t.Errorf("demo left namespaces behind:\n%s", ns)
	}
}
