package profile

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/config"
)

// testPKI is a CA, the gateway's certificate (gw.example.net) and a
// user's (b.test), with their keys, as PEM files in dir.
type testPKI struct {
	dir                          string
	ca                           *x509.Certificate
	caPEM, gwPEM, gwKey          string // paths
	userPEM, userKey             string // paths
	caKey                        *ecdsa.PrivateKey
	userCertDER, userKeyPKCS8DER []byte
}

func newPKI(t *testing.T, dir string) *testPKI {
	t.Helper()
	p := &testPKI{dir: dir}
	now := time.Now()
	p.caKey, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Profile Test CA", Organization: []string{"ipsecd"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &p.caKey.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	p.ca, _ = x509.ParseCertificate(der)
	p.caPEM = p.write(t, "ca.pem", "CERTIFICATE", der)
	issue := func(serial int64, name string, eku x509.ExtKeyUsage, dns []string, email []string) ([]byte, []byte) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			DNSNames: dns, EmailAddresses: email, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{eku}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
		if err != nil {
			t.Fatal(err)
		}
		k, _ := x509.MarshalPKCS8PrivateKey(key)
		return der, k
	}
	gw, gwKey := issue(2, "gw.example.net", x509.ExtKeyUsageServerAuth, []string{"gw.example.net", "a.test"}, nil)
	p.gwPEM = p.write(t, "gw.pem", "CERTIFICATE", gw)
	p.gwKey = p.write(t, "gw.key", "PRIVATE KEY", gwKey)
	p.userCertDER, p.userKeyPKCS8DER = issue(3, "b.test", x509.ExtKeyUsageClientAuth, []string{"b.test"}, nil)
	p.userPEM = p.write(t, "user.pem", "CERTIFICATE", p.userCertDER)
	p.userKey = p.write(t, "user.key", "PRIVATE KEY", p.userKeyPKCS8DER)
	return p
}

func (p *testPKI) write(t *testing.T, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
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
