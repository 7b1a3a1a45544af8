package ike

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"
)

// A test PKI made at test time with crypto/x509: no private key is
// committed.

// keyKind names a key type and size: "rsa2048", "rsa4096", "p256", "p384",
// "p521".
type keyKind string

var (
	keyCacheMu sync.Mutex
	keyCache   = map[string]crypto.Signer{}
)

// testKey returns a fresh key of kind k; slot tells keys of one kind
// apart, and the same (kind, slot) gives the same key within a test
// binary run, because RSA keys take long to generate.
func testKey(t testing.TB, k keyKind, slot string) crypto.Signer {
	t.Helper()
	keyCacheMu.Lock()
	defer keyCacheMu.Unlock()
	if key, ok := keyCache[string(k)+"/"+slot]; ok {
		return key
	}
	var key crypto.Signer
	var err error
	switch k {
	case "rsa2048":
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	case "rsa4096":
		key, err = rsa.GenerateKey(rand.Reader, 4096)
	case "p256":
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "p384":
		key, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "p521":
		key, err = ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	default:
		t.Fatalf("unknown key kind %q", k)
	}
	if err != nil {
		t.Fatal(err)
	}
	keyCache[string(k)+"/"+slot] = key
	return key
}

// testCert is a certificate and its key.
type testCert struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

var serial int64

// certOpts describes a certificate to make.
type certOpts struct {
	CN        string
	DNS       []string
	Email     []string
	IPs       []string
	CA        bool
	NotBefore time.Time // zero: an hour before t0
	NotAfter  time.Time // zero: a day after now
}

// makeCert issues a certificate with key for o, signed by issuer (nil:
// self-signed).
func makeCert(t testing.TB, key crypto.Signer, o certOpts, issuer *testCert) *testCert {
	t.Helper()
	serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{Country: []string{"CH"}, Organization: []string{"ipsecd test"}, CommonName: o.CN},
		NotBefore:    o.NotBefore, NotAfter: o.NotAfter,
		DNSNames: o.DNS, EmailAddresses: o.Email,
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	for _, ip := range o.IPs {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	// Valid both at t0 (the in-memory tests' clock) and now (charon's).
	if tmpl.NotBefore.IsZero() {
		tmpl.NotBefore = t0.Add(-time.Hour)
	}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	}
	if o.CA {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	}
	parent, signer := tmpl, key
	if issuer != nil {
		parent, signer = issuer.Cert, issuer.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCert{Cert: c, Key: key}
}

// certPairConfigs is pairConfigs with certificates: a CA of kind k
// issues a.test's and b.test's certificates (also of kind k, with their
// names as subjectAltNames), and each side trusts the CA.
func certPairConfigs(t testing.TB, k keyKind) (a, b *Config, ca *testCert) {
	t.Helper()
	ca = makeCert(t, testKey(t, k, "ca"), certOpts{CN: "ipsecd test CA", CA: true}, nil)
	certA := makeCert(t, testKey(t, k, "a"), certOpts{CN: "a.test", DNS: []string{"a.test"}}, ca)
	certB := makeCert(t, testKey(t, k, "b"), certOpts{CN: "b.test", DNS: []string{"b.test"}}, ca)
	a, b = pairConfigs(t, []string{"aes256-sha256-x25519"}, []string{"aes128gcm16"})
	for _, c := range []struct {
		cfg  *Config
		cert *testCert
	}{{a, certA}, {b, certB}} {
		c.cfg.PSK = nil
		c.cfg.LocalAuth, c.cfg.RemoteAuth = AuthPubkey, AuthPubkey
		c.cfg.LocalCerts, c.cfg.PrivateKey = []*x509.Certificate{c.cert.Cert}, c.cert.Key
		c.cfg.CACerts = []*x509.Certificate{ca.Cert}
	}
	return a, b, ca
}
