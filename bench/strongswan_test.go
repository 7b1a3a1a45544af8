package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A short run of the strongSwan case: charon at both ends brings the
// tunnel up, iperf3 moves data through it for a second, and the two
// charons' CPU time is counted.
func TestStrongSwanSmoke(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces and charon")
	}
	for _, tool := range []string{charonBin, "swanctl", "iperf3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (scripts/test.sh installs it)", tool)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, err := newLab(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	p, err := startStrongSwan(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	m, err := measure(ctx, l, p, 1, time.Second, time.Second, nil)
	if err != nil {
		p.stop()
		t.Fatal(err)
	}
	if err := p.stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	perGB, ok := m.cpuPerGB()
	t.Logf("%.3f Gbit/s, %d bytes, CPU %v: %.2f s/GB", m.gbps(), m.bytes, m.cpu, perGB)
	if !ok || m.cpu <= 0 || m.bytes == 0 {
		t.Errorf("no CPU figure: cpu %v (measured %v), %d bytes", m.cpu, m.cpuOK, m.bytes)
	}
	// The lab is as before: the namespaces hold no charon address.
	if out, err := l.a.output(ctx, "ip", "-o", "addr", "show", "dev", "lo"); err != nil || strings.Contains(out, swanInnerA) {
		t.Errorf("A's lo after stop: %s %v", out, err)
	}
}
