package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDemoRemoteAccess runs `ipsecd demo --remote-access --mib 4` as
// root: a gateway and a road warrior in network namespaces. The story
// must name alice's EAP-MSCHAPv2 login as the gateway saw it, her lease
// of the pool, the DNS server she got and a name it resolved through
// the tunnel, three pings answered, the stream
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
		"The road warrior holds virtual IP " + lease[1] + " on its ipsec1, and the gateway named DNS server 10.4.0.53.",
		"intranet.corp.example resolved through DNS server 10.4.0.53, in the tunnel: [10.4.0.1]",
		"ping 10.4.0.1 from " + lease[1] + ": 3 packets transmitted, 3 received, 0% packet loss",
		"TCP road warrior " + lease[1] + " → gateway 10.4.0.1:5201: 4 MiB in ",
		"local virtual IPs " + lease[1] + ", DNS 10.4.0.53",
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

// TestDemoRAConfig: the remote-access demo's configs, rendered with a
// certificate from demoRACert and a password from demoSecret, pass
// `ipsecd check` without a warning; the password is 64 hex digits of
// mode 0600, another each run, and the certificate is its own CA for
// the gateway's name.
func TestDemoRAConfig(t *testing.T) {
	dir := t.TempDir()
	cert, key, err := demoRACert(dir, "vpn.demo.example")
	if err != nil {
		t.Fatal(err)
	}
	pw, err := demoSecret(dir, "alice.secret", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{cert, key, pw} {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, want mode 0600", f, err)
		}
	}
	data, _ := os.ReadFile(pw)
	if !regexp.MustCompile(`^[0-9a-f]{64}\n$`).Match(data) {
		t.Errorf("password file holds %d bytes, want 64 hex digits", len(data))
	}
	if again, err := demoSecret(t.TempDir(), "alice.secret", ""); err != nil {
		t.Fatal(err)
	} else if b, _ := os.ReadFile(again); bytes.Equal(b, data) {
		t.Error("two runs made the same password")
	}
	pemData, _ := os.ReadFile(cert)
	block, _ := pem.Decode(pemData)
	if block == nil {
		t.Fatalf("%s holds no PEM block", cert)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckSignatureFrom(c); err != nil || !c.IsCA || c.VerifyHostname("vpn.demo.example") != nil {
		t.Errorf("certificate: self-signed %v, CA %v, names %v; want a self-signed CA for vpn.demo.example", err, c.IsCA, c.DNSNames)
	}
	gw := &demoEndpoint{Name: "gateway", Local: "192.0.2.1", Peer: "192.0.2.2", Port: 4500, Mark: "0x100", Inner: "10.4.0.1", Remote: "10.3.0.0", Net: "10.4.0.0",
		ID: "vpn.demo.example", PeerID: "alice", PSKFile: pw, Control: filepath.Join(dir, "gw.sock"), StateDir: filepath.Join(dir, "gw-state")}
	rw := &demoEndpoint{Name: "road-warrior", Local: "192.0.2.2", Peer: "192.0.2.1", Port: 4500, Mark: "0x100", Remote: "10.4.0.0",
		ID: "alice", PeerID: gw.ID, PSKFile: pw, Control: filepath.Join(dir, "rw.sock"), StateDir: filepath.Join(dir, "rw-state")}
	for _, e := range []*demoEndpoint{gw, rw} {
		cfg, err := demoRAConfig(e, e == gw, cert, key)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"auth: eap-mschapv2", "secret_file: " + pw, "state_dir: " + e.StateDir + "\n"} {
			if !strings.Contains(string(cfg), want) {
				t.Errorf("%s: config lacks %q:\n%s", e.Name, want, cfg)
			}
		}
		path := filepath.Join(dir, e.Name+".yaml")
		if err := os.WriteFile(path, cfg, 0o600); err != nil {
			t.Fatal(err)
		}
		if code, stdout, stderr := execIpsecd(t, "check", "--config", path); code != 0 || stderr != "" {
			t.Errorf("%s: ipsecd check: exit %d\n%s%s\n%s", e.Name, code, stdout, stderr, cfg)
		}
	}
}
