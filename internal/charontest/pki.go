//go:build linux

package charontest

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

// GatewayPKI is what charon as a remote-access gateway proves itself
// with: a test CA and a certificate it issued for the gateway's
// identity, in a swanctl directory for LoadDir.
type GatewayPKI struct {
	// Dir holds x509ca/ca.pem, x509/gw.pem and private/gw.key (PKCS #8).
	Dir string
	// CA is the CA's certificate (PEM), what clients trust; CAFile
	// the file that holds it.
	CA     []byte
	CAFile string
	// Cert is the gateway certificate's name for a connection's local
	// certs (Peer.Certs): charon finds it in Dir's x509/.
	Cert string
}

// WriteGatewayPKI makes a GatewayPKI for id (the certificate's CN and
// DNS name) under dir: ECDSA P-256, valid from an hour ago for a day.
func WriteGatewayPKI(t testing.TB, dir, id string) GatewayPKI {
	t.Helper()
	p := GatewayPKI{Dir: dir, CAFile: filepath.Join(dir, "x509ca", "ca.pem"), Cert: "gw.pem"}
	from, until := time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "charontest CA"},
		NotBefore: from, NotAfter: until, IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: id}, DNSNames: []string{id},
		NotBefore: from, NotAfter: until, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p.CA = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	for _, f := range []struct {
		path string
		data []byte
	}{
		{p.CAFile, p.CA},
		{filepath.Join(dir, "x509", p.Cert), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})},
		{filepath.Join(dir, "private", "gw.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})},
	} {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.path, f.data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p
}
