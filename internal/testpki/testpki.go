// Package testpki makes the certificates tests need: a CA with ECDSA
// P-256 keys that issues leaf certificates, and self-signed ones, valid
// from an hour ago for a day, written as PEM files where a config or a
// peer (charon, FreeRADIUS, swanctl) reads them. It is for tests only:
// its keys are fresh for every call and its errors fail the test.
//
// A CA is safe for concurrent use; its serial numbers never repeat.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// Cert is a certificate with its key.
type Cert struct {
	Cert *x509.Certificate
	DER  []byte
	Key  *ecdsa.PrivateKey
}

// CA is a self-signed certificate authority that issues certificates.
type CA struct {
	Cert
	serial atomic.Int64
}

// Opts are what a certificate says beside its common name.
type Opts struct {
	// DNS are its DNS subjectAltNames; nil: the common name alone
	// (an identity that is a name is then proved by the certificate).
	DNS []string
	// Email and IPs are its email and IP address subjectAltNames.
	Email, IPs []string
	// Org is its subject's organization.
	Org string
	// EKU are its extended key usages (none: any usage).
	EKU []x509.ExtKeyUsage
}

// NewCA returns a CA whose certificate's subject is cn and, if o names
// one, o.Org; o's other fields are for leaves and not used.
func NewCA(t testing.TB, cn string, o Opts) *CA {
	t.Helper()
	ca := &CA{}
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: cn}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature}
	if o.Org != "" {
		tmpl.Subject.Organization = []string{o.Org}
	}
	ca.Cert = *create(t, tmpl, nil, ca.next())
	return ca
}

// Issue returns a certificate for cn that ca signed.
func (ca *CA) Issue(t testing.TB, cn string, o Opts) *Cert {
	t.Helper()
	return create(t, leafTemplate(cn, o), &ca.Cert, ca.next())
}

// SelfSigned returns a self-signed certificate for cn, its own trust
// anchor (a CA that may also sign), as a gateway without a CA has.
func SelfSigned(t testing.TB, cn string, o Opts) *Cert {
	t.Helper()
	tmpl := leafTemplate(cn, o)
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage |= x509.KeyUsageCertSign
	return create(t, tmpl, nil, 1)
}

func (ca *CA) next() int64 { return ca.serial.Add(1) }

func leafTemplate(cn string, o Opts) *x509.Certificate {
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: cn}, DNSNames: o.DNS, EmailAddresses: o.Email,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: o.EKU}
	if o.DNS == nil {
		tmpl.DNSNames = []string{cn}
	}
	if o.Org != "" {
		tmpl.Subject.Organization = []string{o.Org}
	}
	for _, ip := range o.IPs {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	return tmpl
}

// create fills tmpl's serial and validity, makes its key and has parent
// sign it (nil: itself).
func create(t testing.TB, tmpl *x509.Certificate, parent *Cert, serial int64) *Cert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl.SerialNumber, tmpl.NotBefore, tmpl.NotAfter = big.NewInt(serial), now.Add(-time.Hour), now.Add(24*time.Hour)
	issuer, signer := tmpl, key
	if parent != nil {
		issuer, signer = parent.Cert, parent.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &Cert{Cert: cert, DER: der, Key: key}
}

// KeyFormat is how a private key is written.
type KeyFormat int

const (
	// PKCS8 is "PRIVATE KEY" (RFC 5208), what most readers take.
	PKCS8 KeyFormat = iota
	// SEC1 is "EC PRIVATE KEY" (RFC 5915), which swanctl's ecdsa/
	// directory takes.
	SEC1
)

// KeyDER returns c's key in format f.
func (c *Cert) KeyDER(t testing.TB, f KeyFormat) []byte {
	t.Helper()
	var der []byte
	var err error
	if f == SEC1 {
		der, err = x509.MarshalECPrivateKey(c.Key)
	} else {
		der, err = x509.MarshalPKCS8PrivateKey(c.Key)
	}
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// WriteCert writes c's certificate as PEM to path (mode 0600) and
// returns path.
func (c *Cert) WriteCert(t testing.TB, path string) string {
	t.Helper()
	return WritePEM(t, path, "CERTIFICATE", c.DER)
}

// WriteKey writes c's key as PEM in format f to path (mode 0600) and
// returns path.
func (c *Cert) WriteKey(t testing.TB, path string, f KeyFormat) string {
	t.Helper()
	typ := "PRIVATE KEY"
	if f == SEC1 {
		typ = "EC PRIVATE KEY"
	}
	return WritePEM(t, path, typ, c.KeyDER(t, f))
}

// WritePEM writes der as one PEM block of type typ to path (mode 0600)
// and returns path.
func WritePEM(t testing.TB, path, typ string, der []byte) string {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
