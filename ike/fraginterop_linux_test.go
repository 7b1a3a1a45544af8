//go:build linux

package ike

import (
	"crypto/x509"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// noIPFragments drops IP fragments arriving in a namespace, before the
// kernel could reassemble them (prerouting below defrag's priority), so
// that an IKE message larger than the path MTU only gets through in IKE
// fragments.
const noIPFragments = `table ip nofrag {
  chain pre {
    type filter hook prerouting priority -500;
    ip frag-off & 0x3fff != 0 counter drop
  }
}
`

// TestCharonFragmentation: with RSA-4096 certificates in chains of three
// on both sides, IKE_AUTH is some 4 KB; over a 1280-byte MTU with IP
// fragments dropped it only gets through in RFC 7383 fragments, which
// charon and we send and reassemble, in both roles.
func TestCharonFragmentation(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft is not installed (nftables)")
	}
	ch, d, nsC, nsG := charonNamespacesWith(t, "  fragment_size = 1280")
	nsC.IP(t, "link", "set", "vc", "mtu", "1280")
	nsG.IP(t, "link", "set", "vg", "mtu", "1280")
	rules := filepath.Join(t.TempDir(), "nofrag.nft")
	if err := os.WriteFile(rules, []byte(noIPFragments), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{nsC.Name, nsG.Name} {
		if out, err := exec.Command("ip", "netns", "exec", ns, "nft", "-f", rules).CombinedOutput(); err != nil {
			t.Fatalf("nft in %s: %v\n%s", ns, err, out)
		}
	}

	root := makeCert(t, testKey(t, "rsa4096", "ca"), certOpts{CN: "ipsecd test root", CA: true}, nil)
	inter := makeCert(t, testKey(t, "rsa4096", "inter"), certOpts{CN: "ipsecd test intermediate", CA: true}, root)
	a := makeCert(t, testKey(t, "rsa4096", "a.test"), certOpts{CN: "a.test", DNS: []string{"a.test"}}, inter)
	b := makeCert(t, testKey(t, "rsa4096", "b.test"), certOpts{CN: "b.test", DNS: []string{"b.test"}}, inter)
	cfg := loadCertsWith(t, ch, root, a, []*testCert{inter}, b, []*x509.Certificate{inter.Cert})
	for _, role := range []string{"initiator", "responder"} {
		t.Run(role, func(t *testing.T) {
			from := ch.LogSize()
			bothRolesOne(t, ch, d, cfg, role, "authentication of 'b.test' with RSA_EMSA_PKCS1_SHA2_256 successful")
			got := ch.LogSince(from)
			for _, want := range []string{"received fragment #1 of", "splitting IKE message"} {
				if !strings.Contains(got, want) {
					t.Errorf("charon's log does not say %q: fragments did not go both ways", want)
				}
			}
			for _, l := range strings.Split(got, "\n") {
				if strings.Contains(l, "fragment") {
					t.Log(strings.TrimSpace(l))
				}
			}
		})
	}
}
