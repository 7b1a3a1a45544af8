//go:build linux

package integration

import (
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/internal/charontest"
)

// TestViciLoadAllPinned: swanctl --load-all loads a connection whose
// remote.certs pins charon's certificate (b.test.pem) into ipsecd. With
// that certificate charon's IKE SA comes up and carries a ping; with
// another certificate of the same CA, for the same identity (b2.pem),
// ipsecd refuses it. swanctl --list-certs prints the CA both hold the
// same for ipsecd as for charon.
func TestViciLoadAllPinned(t *testing.T) {
	for _, tt := range []struct {
		charonCert string
		up         bool
	}{{"b.test", true}, {"b2", false}} {
		t.Run(tt.charonCert, func(t *testing.T) {
			charontest.Require(t)
			pki := t.TempDir()
			writePKI(t, pki, "ipsecd vici test CA", true, pkiLeaf{"a.test", "a.test"}, pkiLeaf{"b.test", "b.test"}, pkiLeaf{"b2", "b.test"})
			conf := strings.Replace(viciCertsConf(false), "      id = b.test\n", "      id = b.test\n      certs = b.test.pem\n", 1)
			r, sock, _ := viciCertsRig(t, pki, tt.charonCert, conf, map[string]string{"b.test.pem": "x509/b.test.pem"})
			names := childrenNames[:1]
			out, err := viciSwanctlErr(sock, "--initiate", "--child", names[0], "--timeout", "10")
			if !tt.up {
				if err == nil {
					t.Fatalf("charon with another certificate of the CA: initiated\n%s", out)
				}
				if sas := r.ch.ListSAs(); strings.Contains(sas, "ESTABLISHED") {
					t.Fatalf("charon's SAs after a refusal:\n%s", sas)
				}
				t.Logf("refused as it should be:\n%s", out)
			} else {
				if err != nil {
					t.Fatalf("swanctl --initiate: %v\n%s", err, out)
				}
				r.waitChildren(t, "initiating over vici", names, nil)
				r.pingChildren(t, names)
			}
			// The CA as swanctl prints it, from ipsecd and from charon,
			// selected by subject and by type and flag.
			for _, args := range [][]string{{"--list-certs", "--subject", "CN=ipsecd vici test CA", "--utc"},
				{"--list-certs", "--type", "x509", "--flag", "ca", "--utc"}} {
				ours := viciSwanctl(t, sock, args...)
				theirs, err := r.ch.Swanctl(args...)
				if err != nil || ours != theirs || !strings.Contains(ours, "ipsecd vici test CA") {
					t.Errorf("swanctl %v: ipsecd's\n%s\ncharon's (%v)\n%s", args, ours, err, theirs)
				}
			}
			if conns := viciSwanctl(t, sock, "--list-conns"); !strings.Contains(conns, "certs: CN=a.test") || !strings.Contains(conns, "certs: CN=b.test") {
				t.Errorf("swanctl --list-conns does not name our certificate and the pinned one by subject, as charon's:\n%s", conns)
			}
			all := viciSwanctl(t, sock, "--list-certs", "--utc", "--short")
			if strings.Count(all, "subject:") != 3 || !strings.Contains(all, "has private key") {
				t.Errorf("swanctl --list-certs --short (ipsecd: the CA, a.test with its key, b.test pinned):\n%s", all)
			}
		})
	}
}
