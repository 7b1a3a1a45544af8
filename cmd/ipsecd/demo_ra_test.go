package main

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

// TestDemoRemoteAccess runs `ipsecd demo --remote-access --mib 4` as
// root: a gateway and a road warrior in network namespaces. The story
// must name alice's EAP-MSCHAPv2 login as the gateway saw it, her lease
// of the pool, the DNS server she got, three pings answered, the stream
// whole and 0 lost, and leave no namespace, no certificate and no
// password behind.
func TestDemoRemoteAccess(t *testing.T) {
	requireNamespaces(t, "TestDemoRemoteAccessWithoutRoot")
	bin := ipsecdBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "demo", "--remote-access", "--mib", "4")
	out, err := cmd.CombinedOutput()
	tag := "-" + strconv.Itoa(cmd.Process.Pid)
	if ns, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(ns), "ipsecd-demo-gw"+tag) || strings.Contains(string(ns), "ipsecd-demo-rw"+tag) {
		t.Errorf("demo left namespaces ipsecd-demo-{gw,rw}%s behind:\n%s", tag, ns)
	}
	if err != nil {
		t.Fatalf("ipsecd demo --remote-access: %v\n%s", err, out)
	}
	text := string(out)
	lease := regexp.MustCompile(`(?m)^\s+(10\.3\.0\.\d+)\s+online\s+'alice'$`).FindStringSubmatch(text)
	if lease == nil {
		t.Fatalf("demo output shows no online lease of the pool 10.3.0.0/24 for alice:\n%s", text)
	}
	for _, want := range []string{
		"the road warrior logged in with EAP-MSCHAPv2 as 'alice' (the gateway's ike list: remote EAP identity 'alice')",
		"waiting for its IKE SA, its virtual IP and the address on its ipsec1 ... up in ",
		"The road warrior holds virtual IP " + lease[1] + " on its ipsec1, and the gateway named DNS server 10.3.0.53.",
		"ping 10.4.0.1 from " + lease[1] + ": 3 packets transmitted, 3 received, 0% packet loss",
		"TCP road warrior " + lease[1] + " → gateway 10.4.0.1:5201: 4 MiB in ",
		"local virtual IPs " + lease[1] + ", DNS 10.3.0.53",
		"\n0 lost: every ping answered",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks %q:\n%s", want, text)
		}
	}
	m := regexp.MustCompile(`made for this run in (/\S+) \(mode 0600`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("demo output does not name the directory of its certificate and password:\n%s", text)
	}
	if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
		t.Errorf("certificate and password directory %s after the demo: %v, want it removed", m[1], err)
	}
}

// TestDemoRemoteAccessWithoutRoot: as a user, --remote-access fails
// with a message naming root and what it is needed for.
func TestDemoRemoteAccessWithoutRoot(t *testing.T) {
	out, err := asUser(t, ipsecdBinary(t), "demo", "--remote-access").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "ipsecd demo: --remote-access needs root: it makes network namespaces, a veth pair and TUN devices") {
		t.Errorf("demo --remote-access as a user: %v, want exit 1 naming root:\n%s", err, out)
	}
}
