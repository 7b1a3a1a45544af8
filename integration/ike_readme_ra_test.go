//go:build linux

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/internal/charontest"
)

// readmeRASecret finds alice's password in the README's swanctl.conf.
var readmeRASecret = regexp.MustCompile(`(?m)^\s*secret = "([^"]+)"$`)

// TestIKEReadmeRemoteAccess follows the README's remote-access example:
// the real binary runs examples/remote-access.yaml as it stands (its key
// paths moved to a temporary directory) at 192.0.2.1, with the
// self-signed certificate examples/genkeys.sh makes and the password the
// README writes into keys/alice.secret; charon 5.9.8 in namespace B loads
// the README's swanctl.conf verbatim, with the certificate in x509ca/,
// and initiates its child "rw". The gateway lists alice with a virtual
// IP of the pool, charon got the pool's DNS server, and pings from the
// virtual IP reach 10.4.0.1 behind the gateway.
func TestIKEReadmeRemoteAccess(t *testing.T) {
	charontest.Require(t)
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	swanctl := readmeBlock(t, readme, "<!-- ra-example: swanctl -->")
	m := readmeRASecret.FindStringSubmatch(swanctl)
	if m == nil {
		t.Fatalf("README.md's remote-access swanctl.conf has no secret:\n%s", swanctl)
	}
	password := m[1]
	for _, want := range []string{
		"examples/genkeys.sh examples keys/gw.pem\n",
		"echo " + password + " >examples/keys/alice.secret",
		"ipsecd run --config examples/remote-access.yaml\n",
		"remote_addrs = " + underlayA4 + "\n",
	} {
		if !strings.Contains(readme, want) {
			t.Errorf("README.md's remote-access example lacks %q", want)
		}
	}

	// The gateway's files, made as the README makes them.
	dir := t.TempDir()
	if out, err := exec.Command("bash", "../examples/genkeys.sh", dir, "keys/gw.pem").CombinedOutput(); err != nil {
		t.Fatalf("examples/genkeys.sh %s keys/gw.pem: %v\n%s", dir, err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "keys", "alice.secret"), []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("../examples/remote-access.yaml")
	if err != nil {
		t.Fatal(err)
	}
	gateway := strings.ReplaceAll(string(example), " keys/", " "+filepath.Join(dir, "keys")+"/")

	p := newPair(t)
	d := startDaemon(t, p.a, gateway)
	p.b.mustRun(t, "ip", "route", "add", "default", "via", underlayA4)
	ch := charontest.Start(t, p.b.name, "")
	swanctlDir := filepath.Join(t.TempDir(), "swanctl")
	if err := os.MkdirAll(filepath.Join(swanctlDir, "x509ca"), 0o700); err != nil {
		t.Fatal(err)
	}
	cert, err := os.ReadFile(filepath.Join(dir, "keys", "gw.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(swanctlDir, "x509ca", "gw.pem"), cert, 0o600); err != nil {
		t.Fatal(err)
	}
	ch.LoadDir(swanctl, swanctlDir)
	if out, err := ch.Swanctl("--initiate", "--child", "rw", "--timeout", "15"); err != nil {
		t.Fatalf("swanctl --initiate --child rw: %v\n%s", err, out)
	}
	s := d.waitIKE("alice's child", func(s control.IKESAInfo, _ control.IKEChildInfo) bool { return s.RemoteEAPID == "alice" })
	if fmt.Sprint(s.RemoteVIPs) != "[10.3.0.1]" {
		t.Errorf("ike list: alice has virtual IPs %v, want the pool's first, 10.3.0.1", s.RemoteVIPs)
	}
	ping(t, p.b, "10.4.0.1", 3)
	// Charon takes the DNS server from the CFG_REPLY (and, without its
	// resolve plugin, does not install it).
	if log := ch.LogSince(0); !strings.Contains(log, "processing INTERNAL_IP4_DNS attribute") {
		t.Errorf("charon's log shows no DNS server in the gateway's reply")
	}
	if out, _ := ch.Swanctl("--list-sas", "--raw"); !strings.Contains(out, "local-vips=[10.3.0.1]") {
		t.Errorf("swanctl --list-sas lists no local virtual IP 10.3.0.1:\n%s", out)
	}
	if out, err := d.ctl("pool", "list", "--leases"); err != nil || !strings.Contains(out, "10.3.0.1") || !strings.Contains(out, "online  'alice'") {
		t.Errorf("pool list --leases: %v\n%s", err, out)
	}
}
