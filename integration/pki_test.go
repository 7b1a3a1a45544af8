//go:build linux

package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// pkiLeaf is a certificate writePKI issues: files NAME.pem and NAME.key
// for the identity id (its CN and DNS name).
type pkiLeaf struct{ name, id string }

// writePKI writes under dir a CA named caName (ca.pem) and, for each
// leaf, a certificate the CA signed and its ECDSA P-256 key, all PEM and
// 0600, valid from an hour ago for a day. Keys are PKCS#8 ("PRIVATE
// KEY"), or with sec1 SEC1 ("EC PRIVATE KEY"), which swanctl's ecdsa/
// directory takes. It returns the paths by file name.
func writePKI(t *testing.T, dir, caName string, sec1 bool, leaves ...pkiLeaf) map[string]string {
	t.Helper()
	paths := map[string]string{}
	write := func(name, typ string, der []byte) {
		paths[name] = filepath.Join(dir, name)
		if err := os.WriteFile(paths[name], pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	from, until := time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: caName},
		NotBefore: from, NotAfter: until, IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	write("ca.pem", "CERTIFICATE", caDER)
	for i, l := range leaves {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: l.id},
			DNSNames: []string{l.id}, NotBefore: from, NotAfter: until, KeyUsage: x509.KeyUsageDigitalSignature}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		write(l.name+".pem", "CERTIFICATE", der)
		if sec1 {
			k, _ := x509.MarshalECPrivateKey(key)
			write(l.name+".key", "EC PRIVATE KEY", k)
		} else {
			k, _ := x509.MarshalPKCS8PrivateKey(key)
			write(l.name+".key", "PRIVATE KEY", k)
		}
	}
	return paths
}

// raPKI writes a CA and the gateway's certificate (a.test) and key into
// dir, and returns their paths.
func raPKI(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	p := writePKI(t, dir, "ipsecd RA test CA", false, pkiLeaf{"gw", "a.test"})
	return p["ca.pem"], p["gw.pem"], p["gw.key"]
}
