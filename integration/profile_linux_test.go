//go:build linux

package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

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
			pem := profilePKI(t, dir)
			sides, secrets := "    local:  {auth: psk, id: a.test}\n    remote: {auth: psk, id: b.test}",
				"secrets:\n  - {ids: [a.test, b.test], secret: \"a profile's psk\"}\n"
			if auth == "pubkey" {
				sides, secrets = fmt.Sprintf("    local:  {auth: pubkey, id: a.test, cert: %s, key: %s}\n    remote: {auth: pubkey, cacerts: [%s]}",
					pem["gw.pem"], pem["gw.key"], pem["ca.pem"]), ""
			}
			d := startDaemon(t, p.a, fmt.Sprintf(profileGateway, sides, secrets))
			ch := charontest.Start(t, p.b.name, "")
			out := filepath.Join(ch.Dir, "profile")
			cmd := exec.Command(ipsecdBin, "profile", "strongswan", "--config", d.cfgPath, "--connection", "rw", "--user", "b.test", "--out", out)
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("ipsecd profile strongswan: %v\n%s", err, b)
			}
			if auth == "pubkey" {
				for name, dst := range map[string]string{"user.pem": "x509/user.pem", "user.key": "private/user.pem"} {
					b, _ := os.ReadFile(pem[name])
					os.MkdirAll(filepath.Dir(filepath.Join(out, dst)), 0o700)
					if err := os.WriteFile(filepath.Join(out, dst), b, 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			conf, err := os.ReadFile(filepath.Join(out, "swanctl.conf"))
			if err != nil {
				t.Fatal(err)
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

// profilePKI writes a CA, the gateway's certificate (a.test) and the
// user's (b.test) with their keys into dir as PEM, and returns their
// paths by name: ca.pem, gw.pem, gw.key, user.pem, user.key.
func profilePKI(t *testing.T, dir string) map[string]string {
	t.Helper()
	paths := map[string]string{}
	save := func(name, typ string, der []byte) {
		paths[name] = filepath.Join(dir, name)
		if err := os.WriteFile(paths[name], pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	from, until := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ipsecd profile test CA"},
		NotBefore: from, NotAfter: until, IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	save("ca.pem", "CERTIFICATE", caDER)
	ca, _ = x509.ParseCertificate(caDER)
	for i, name := range []string{"gw", "user"} {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		id := map[string]string{"gw": "a.test", "user": "b.test"}[name]
		leaf := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: id},
			DNSNames: []string{id}, NotBefore: from, NotAfter: until, KeyUsage: x509.KeyUsageDigitalSignature}
		der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		k, _ := x509.MarshalPKCS8PrivateKey(key)
		save(name+".pem", "CERTIFICATE", der)
		save(name+".key", "PRIVATE KEY", k)
	}
	return paths
}
