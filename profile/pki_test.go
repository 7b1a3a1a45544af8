package profile

import (
	"crypto/x509"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/internal/testpki"
)

// testPKI is a CA, the gateway's certificate (gw.example.net, also
// a.test) and a user's (b.test), with their keys (PKCS#8), as PEM files
// in dir (package testpki).
type testPKI struct {
	dir                          string
	ca                           *x509.Certificate
	caPEM, gwPEM, gwKey          string // paths
	userPEM, userKey             string // paths
	userCertDER, userKeyPKCS8DER []byte
}

func newPKI(t *testing.T, dir string) *testPKI {
	t.Helper()
	ca := testpki.NewCA(t, "Profile Test CA", testpki.Opts{Org: "ipsecd"})
	gw := ca.Issue(t, "gw.example.net", testpki.Opts{DNS: []string{"gw.example.net", "a.test"}, EKU: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	user := ca.Issue(t, "b.test", testpki.Opts{EKU: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	path := func(name string) string { return filepath.Join(dir, name) }
	return &testPKI{dir: dir, ca: ca.Cert.Cert,
		caPEM: ca.WriteCert(t, path("ca.pem")), gwPEM: gw.WriteCert(t, path("gw.pem")), gwKey: gw.WriteKey(t, path("gw.key"), testpki.PKCS8),
		userPEM: user.WriteCert(t, path("user.pem")), userKey: user.WriteKey(t, path("user.key"), testpki.PKCS8),
		userCertDER: user.DER, userKeyPKCS8DER: user.KeyDER(t, testpki.PKCS8)}
}

// gatewayYAML is a remote-access gateway's config: the connection rw
// (the gateway's certificate, users by certificate), psk (a pre-shared
// key both ways), eap (the user alice by EAP-MSCHAPv2, a full tunnel)
// and the children's traffic. Edits replace text in it.
const gatewayYAML = `underlay: {udp: "0.0.0.0:4500"}
interfaces:
  - {name: ipsec1, if_id: 1, addresses: [198.51.100.1/24]}
pools:
  - {name: rw4, addrs: 10.3.0.0/24, dns: [10.3.0.53]}
  - {name: rw6, addrs: "fd00:3::/120"}
connections:
  - name: rw
    local_addrs: [192.0.2.1]
    pools: [rw4, rw6]
    proposals: [aes256gcm16-prfsha384-ecp384, aes256-sha256-x25519]
    dpd_delay: 30s
    rekey_time: 4h
    local:  {auth: pubkey, id: gw.example.net, cert: GW_PEM, key: GW_KEY}
    remote: {auth: pubkey, cacerts: [CA_PEM]}
    children:
      - {name: net, if_id: 1, local_ts: [198.51.100.0/24], remote_ts: [dynamic], esp_proposals: [aes256gcm16-ecp384, aes128-sha256], rekey_time: 1h}
  - name: psk
    local_addrs: [192.0.2.1]
    encap: true
    proposals: [aes256-sha256-modp2048]
    local:  {auth: psk, id: a.test}
    remote: {auth: psk, id: b.test}
    children:
      - {name: psknet, if_id: 1, local_ts: [198.51.100.0/24], remote_ts: [203.0.113.0/24], esp_proposals: [aes256-sha256]}
  - name: eap
    local_addrs: [192.0.2.1]
    pools: [rw4]
    proposals: [apple, android]
    local:  {auth: pubkey, id: gw.example.net, cert: GW_PEM, key: GW_KEY}
    remote: {auth: eap-mschapv2, eap_id: alice}
    children:
      - {name: eapnet, if_id: 1, local_ts: [0.0.0.0/0], remote_ts: [dynamic], esp_proposals: [apple, android]}
secrets:
  - {ids: [a.test, b.test], secret: "it's a \"test\" psk"}
  - {type: eap, ids: [alice], secret: alice-pw}
`

// loadGateway writes gatewayYAML with edits (old, new, old, new, ...)
// and p's paths into dir and loads it.
func loadGateway(t *testing.T, p *testPKI, edits ...string) *config.Config {
	t.Helper()
	text := strings.NewReplacer("GW_PEM", p.gwPEM, "GW_KEY", p.gwKey, "CA_PEM", p.caPEM).Replace(gatewayYAML)
	for i := 0; i+1 < len(edits); i += 2 {
		if !strings.Contains(text, edits[i]) {
			t.Fatalf("gatewayYAML has no %q", edits[i])
		}
		text = strings.Replace(text, edits[i], edits[i+1], 1)
	}
	path := filepath.Join(p.dir, "ipsecd.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
