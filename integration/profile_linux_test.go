//go:build linux

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/internal/charontest"
)

// profileGateway is ipsecd's remote-access connection rw in A for
// TestProfileStrongswanConnects: proposals from the apple and android
// presets; AUTH is %s's local and remote lines; the secrets follow.
const profileGateway = `underlay: {udp: "0.0.0.0:4500"}
interfaces:
  - {name: ipsec1, if_id: 1, addresses: [198.51.100.1/24], routes: [203.0.113.0/24]}
connections:
  - name: rw
    local_addrs: [192.0.2.1]
    encap: true
    dpd_delay: 30s
    proposals: [apple, android]
%s
    children:
      - {name: net, if_id: 1, local_ts: [198.51.100.0/24], remote_ts: [203.0.113.0/24], esp_proposals: [apple, android]}
%s`

// TestProfileStrongswanConnects: the swanctl profile that `ipsecd profile
// strongswan` writes from the gateway's config, loaded into charon 5.9.8
// unchanged (plus, with certificates, the user's own certificate and key,
// which the gateway does not have), connects to that gateway and carries
// a ping each way: with a pre-shared key, and with the gateway's and the
// user's certificates (the CA from the profile's x509ca/).
func TestProfileStrongswanConnects(t *testing.T) {
	charontest.Require(t)
	for _, auth := range []string{"psk", "pubkey"} {
		t.Run(auth, func(t *testing.T) {
			p := newPair(t)
			p.b.mustRun(t, "ip", "addr", "add", innerB4+"/32", "dev", "lo")
			p.b.mustRun(t, "ip", "route", "add", "default", "via", underlayA4)
			dir := t.TempDir()
			pem := writePKI(t, dir, "ipsecd profile test CA", false, pkiLeaf{"gw", "a.test"}, pkiLeaf{"user", "b.test"})
			sides, secrets := "    local:  {auth: psk, id: a.test}\n    remote: {auth: psk, id: b.test}",
				"secrets:\n  - {ids: [a.test, b.test], secret: \"a profile's psk\"}\n"
			if auth == "pubkey" {
				sides, secrets = fmt.Sprintf("    local:  {auth: pubkey, id: a.test, cert: %s, key: %s}\n    remote: {auth: pubkey, cacerts: [%s]}",
					pem["gw.pem"], pem["gw.key"], pem["ca.pem"]), ""
			}
			d := startDaemon(t, p.a, fmt.Sprintf(profileGateway, sides, secrets))
			ch := charontest.Start(t, p.b.name, "")
			out := filepath.Join(ch.Dir, "profile")
			conf := swanctlProfile(t, d, out, "--user", "b.test")
			if auth == "pubkey" {
				for name, dst := range map[string]string{"user.pem": "x509/user.pem", "user.key": "private/user.pem"} {
					b, _ := os.ReadFile(pem[name])
					os.MkdirAll(filepath.Dir(filepath.Join(out, dst)), 0o700)
					if err := os.WriteFile(filepath.Join(out, dst), b, 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			t.Logf("the profile's swanctl.conf:\n%s", conf)
			ch.LoadDir(string(conf), out)
			if o, err := ch.Swanctl("--initiate", "--child", "net", "--timeout", "15"); err != nil {
				t.Fatalf("swanctl --initiate: %v\n%s", err, o)
			}
			ping(t, p.b, innerA4, 2)
			ping(t, p.a, innerB4, 2)
		})
	}
}

// TestProfileStrongswanEAP: the swanctl profile of the remote-access
// gateway of TestIKECharonRoadWarrior (a pool, EAP-MSCHAPv2 users, the
// CA given with --ca since the gateway's config has it nowhere, and the
// address with --address since it listens on any), with
// only the user's password added where the profile says, connects: the
// client asks for a virtual IP, gets the pool's first, and pings the
// network behind the gateway from it.
func TestProfileStrongswanEAP(t *testing.T) {
	charontest.Require(t)
	p := newPair(t)
	dir := t.TempDir()
	caFile, cert, key := raPKI(t, dir)
	p.b.mustRun(t, "ip", "route", "add", "default", "via", underlayA4)
	d := startDaemon(t, p.a, raGateway(cert, key))
	ch := charontest.Start(t, p.b.name, "")
	out := filepath.Join(ch.Dir, "profile")
	conf := swanctlProfile(t, d, out, "--user", "alice", "--ca", caFile, "--address", underlayA4)
	// The user fills in the password: the secret's lines uncommented.
	lines := strings.Split(string(conf), "\n")
	filled := 0
	for i, l := range lines {
		if strings.HasPrefix(l, "\t# eap-rw {") || strings.HasPrefix(l, "\t# \t") || l == "\t# }" {
			lines[i] = strings.Replace(strings.Replace(l, "# ", "", 1), `secret = ""`, `secret = "alice-mschapv2-pw"`, 1)
			filled++
		}
	}
	if filled != 4 || !strings.Contains(string(conf), "vips = 0.0.0.0\n") {
		t.Fatalf("the profile has no commented eap-rw secret (%d lines) or asks for no IPv4 address:\n%s", filled, conf)
	}
	ch.LoadDir(strings.Join(lines, "\n"), out)
	if o, err := ch.Swanctl("--initiate", "--child", "net", "--timeout", "15"); err != nil {
		t.Fatalf("swanctl --initiate: %v\n%s", err, o)
	}
	if s := d.waitIKE("alice's child", anyChild); s.RemoteEAPID != "alice" || fmt.Sprint(s.RemoteVIPs) != "[10.3.0.1]" {
		t.Fatalf("ike list: EAP identity %q, virtual IPs %v; want alice and 10.3.0.1", s.RemoteEAPID, s.RemoteVIPs)
	}
	ping(t, p.b, "198.51.100.1", 2)
}

// swanctlProfile runs ipsecd profile strongswan for d's connection rw
// with args into the directory out, and returns its swanctl.conf.
func swanctlProfile(t *testing.T, d *daemon, out string, args ...string) []byte {
	t.Helper()
	args = append([]string{"profile", "strongswan", "--config", d.cfgPath, "--connection", "rw", "--out", out}, args...)
	if b, err := exec.Command(ipsecdBin, args...).CombinedOutput(); err != nil {
		t.Fatalf("ipsecd %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	conf, err := os.ReadFile(filepath.Join(out, "swanctl.conf"))
	if err != nil {
		t.Fatal(err)
	}
	return conf
}
