// Package testpki makes throwaway certificates for tests: a CA and leaf
// certificates it signs, ECDSA P-256, valid for an hour around now, as
// PEM files with the modes a daemon's key files have (0600).
package testpki

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
	"sync/atomic"
	"testing"
	"time"
)

// CA is a test certificate authority.
type CA struct {
	Cert *x509.Certificate
	DER  []byte
	key  *ecdsa.PrivateKey
}

var serial atomic.Int64

// NewCA makes a CA named cn.
func NewCA(t testing.TB, cn string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := template(cn)
	tmpl.IsCA, tmpl.KeyUsage = true, x509.KeyUsageCertSign|x509.KeyUsageDigitalSignature
	der, cert := create(t, tmpl, tmpl, key, key)
	return &CA{Cert: cert, DER: der, key: key}
}

// Leaf is a certificate the CA signed and its key.
type Leaf struct {
	Cert *x509.Certificate
	DER  []byte
	Key  *ecdsa.PrivateKey
}

// Issue signs a certificate for name (its CN and DNS name) with the
// serverAuth and clientAuth extended key usages, as a gateway's
// certificate for Windows and Apple clients needs.
func (ca *CA) Issue(t testing.TB, name string) Leaf {
	t.Helper()
	key := newKey(t)
	tmpl := template(name)
	tmpl.DNSNames = []string{name}
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	der, cert := create(t, tmpl, ca.Cert, key, ca.key)
	return Leaf{Cert: cert, DER: der, Key: key}
}

// WriteCert writes der as a PEM certificate to path (0600), making its
// directory.
func WriteCert(t testing.TB, path string, der []byte) {
	t.Helper()
	write(t, path, "CERTIFICATE", der)
}

// WriteKey writes key as a PEM PKCS#8 private key to path (0600).
func WriteKey(t testing.TB, path string, key *ecdsa.PrivateKey) {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write(t, path, "PRIVATE KEY", der)
}

func write(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func template(cn string) *x509.Certificate {
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: cn},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, BasicConstraintsValid: true,
	}
}

func create(t testing.TB, tmpl, parent *x509.Certificate, key, parentKey *ecdsa.PrivateKey) ([]byte, *x509.Certificate) {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return der, cert
}
