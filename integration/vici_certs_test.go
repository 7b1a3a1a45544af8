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

// viciCertsConf is swanctl.conf for ipsecd: pubkey both ways, our
// certificate by its file name in x509/, the CA's in x509ca/ when
// cacerts is set (else any CA loaded), and two children.
func viciCertsConf(cacerts bool) string {
	ca := ""
	if cacerts {
		ca = "\n      cacerts = ca.pem"
	}
	var children strings.Builder
	for i, n := range childrenNames[:2] {
		fmt.Fprintf(&children, "      %s {\n        local_ts = 198.51.100.%d/32\n        remote_ts = 203.0.113.%d/32\n        esp_proposals = %s\n        if_id_in = 1\n        if_id_out = 1\n      }\n",
			n, i+1, i+1, childrenESP[i])
	}
	return fmt.Sprintf(`connections {
  gw {
    local_addrs = %s
    remote_addrs = %s
    version = 2
    proposals = aes256-sha256-x25519
    encap = yes
    local {
      auth = pubkey
      id = a.test
      certs = a.test.pem
    }
    remote {
      auth = pubkey
      id = b.test%s
    }
    children {
%s    }
  }
}
`, underlayA4, underlayB4, ca, children.String())
}

// TestViciLoadAllCerts: swanctl --load-all loads ipsecd's certificate,
// its key and the CA into ipsecd over vici, and a connection that names
// them as charon's users write it (certs = a.test.pem, cacerts = ca.pem
// or none: any CA loaded); initiated over vici, the IKE SA comes up with
// certificates against charon, and each of its two children carries a
// ping.
func TestViciLoadAllCerts(t *testing.T) {
	for _, cacerts := range []bool{true, false} {
		t.Run(fmt.Sprintf("cacerts=%v", cacerts), func(t *testing.T) {
			charontest.Require(t)
			names := childrenNames[:2]
			pki := t.TempDir()
			writePKI(t, pki, "ipsecd vici test CA", true, pkiLeaf{"a.test", "a.test"}, pkiLeaf{"b.test", "b.test"})
			r, sock, out := viciCertsRig(t, pki, "b.test", viciCertsConf(cacerts), nil)
			for _, n := range names {
				viciSwanctl(t, sock, "--initiate", "--child", n, "--timeout", "10")
			}
			r.waitChildren(t, "initiating over vici", names, nil)
			r.pingChildren(t, names)
			if sas := r.ch.ListSAs(); !strings.Contains(sas, "remote 'a.test'") {
				t.Errorf("charon's SAs:\n%s", sas)
			}
			t.Logf("swanctl --load-all:\n%s", out)
		})
	}
}

// viciCertsRig starts charon in b with the certificate NAME.pem of pki
// (charonCert, for b.test) and ipsecd in a with a vici socket, and loads
// conf (swanctl.conf) with ca.pem, a.test.pem, its key and the files of
// extra (name in pki: path under the swanctl directory) into ipsecd with
// swanctl --load-all. It returns swanctl's output.
func viciCertsRig(t *testing.T, pki, charonCert, conf string, extra map[string]string) (r *ikeRig, sock, out string) {
	t.Helper()
	r = &ikeRig{p: newPair(t)}
	for i := range childrenNames[:2] {
		r.p.b.mustRun(t, "ip", "addr", "add", fmt.Sprintf("203.0.113.%d/32", i+1), "dev", "lo")
	}
	r.p.b.mustRun(t, "ip", "route", "add", "default", "via", underlayA4)
	r.ch = charontest.Start(t, r.p.b.name, "")
	chDir := filepath.Join(t.TempDir(), "swanctl")
	copyFiles(t, map[string]string{filepath.Join(pki, charonCert+".key"): filepath.Join(chDir, "ecdsa", "b.key")})
	conn := charonChildrenConn()
	conn.Children = conn.Children[:2]
	conn.Local = charontest.Peer{Auth: "pubkey", ID: "b.test", Certs: filepath.Join(pki, charonCert+".pem")}
	conn.Remote = charontest.Peer{Auth: "pubkey", ID: "a.test", CACerts: filepath.Join(pki, "ca.pem")}
	r.ch.LoadDir(conn.String(), chDir)

	sock = filepath.Join(t.TempDir(), "charon.vici")
	r.d = startDaemon(t, r.p.a, fmt.Sprintf(`log: {level: debug}
ike:
  port: 500
  retransmit: {timeout: 500ms, base: 1, tries: 2}
vici: %s
underlay: {udp: "0.0.0.0:4500"}
interfaces:
  - {name: ipsec1, if_id: 1, addresses: [198.51.100.1/24, 198.51.100.2/32], routes: [203.0.113.0/24]}
`, sock))
	dir := t.TempDir()
	files := map[string]string{
		filepath.Join(pki, "ca.pem"):     filepath.Join(dir, "x509ca", "ca.pem"),
		filepath.Join(pki, "a.test.pem"): filepath.Join(dir, "x509", "a.test.pem"),
		filepath.Join(pki, "a.test.key"): filepath.Join(dir, "ecdsa", "a.test.key"),
	}
	for name, to := range extra {
		files[filepath.Join(pki, name)] = filepath.Join(dir, to)
	}
	copyFiles(t, files)
	path := filepath.Join(dir, "swanctl.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("timeout", "30", "swanctl", "--load-all", "--file", path, "--uri", "unix://"+sock)
	cmd.Env = append(os.Environ(), "SWANCTL_DIR="+dir)
	b, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(b), "loaded connection 'gw'") {
		t.Fatalf("swanctl --load-all: %v\n%s", err, b)
	}
	return r, sock, string(b)
}

// copyFiles copies each file to its destination, making its directory.
func copyFiles(t *testing.T, files map[string]string) {
	t.Helper()
	for from, to := range files {
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
