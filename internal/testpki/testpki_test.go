package testpki

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
)

// TestIssue: a leaf verifies against its CA for its name and usage, and
// not against another CA; serial numbers differ; a self-signed
// certificate is its own anchor.
func TestIssue(t *testing.T) {
	ca, other := NewCA(t, "test CA", Opts{}), NewCA(t, "other CA", Opts{})
	leaf := ca.Issue(t, "gw.example.net", Opts{EKU: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	second := ca.Issue(t, "b.test", Opts{DNS: []string{"b.test", "a.test"}, Email: []string{"b@example.net"}, IPs: []string{"192.0.2.2"}})
	pool := func(c *CA) *x509.CertPool { p := x509.NewCertPool(); p.AddCert(c.Cert.Cert); return p }
	if _, err := leaf.Cert.Verify(x509.VerifyOptions{Roots: pool(ca), DNSName: "gw.example.net"}); err != nil {
		t.Errorf("leaf against its CA: %v", err)
	}
	if _, err := leaf.Cert.Verify(x509.VerifyOptions{Roots: pool(other), DNSName: "gw.example.net"}); err == nil {
		t.Error("leaf verified against another CA")
	}
	if leaf.Cert.SerialNumber.Cmp(second.Cert.SerialNumber) == 0 || leaf.Cert.SerialNumber.Cmp(ca.Cert.Cert.SerialNumber) == 0 {
		t.Errorf("serials %v, %v, CA's %v: want all different", leaf.Cert.SerialNumber, second.Cert.SerialNumber, ca.Cert.Cert.SerialNumber)
	}
	if got := second.Cert.DNSNames; len(got) != 2 || got[1] != "a.test" || len(second.Cert.EmailAddresses) != 1 || len(second.Cert.IPAddresses) != 1 {
		t.Errorf("subjectAltNames: DNS %v, email %v, IPs %v", got, second.Cert.EmailAddresses, second.Cert.IPAddresses)
	}
	self := SelfSigned(t, "gw.test", Opts{})
	roots := x509.NewCertPool()
	roots.AddCert(self.Cert)
	if _, err := self.Cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "gw.test"}); err != nil || !self.Cert.IsCA {
		t.Errorf("self-signed: %v (CA: %v)", err, self.Cert.IsCA)
	}
}

// TestWrite: the files hold what they say, keys in either format, and
// only their owner may read them.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	c := NewCA(t, "test CA", Opts{}).Issue(t, "a.test", Opts{})
	for _, tt := range []struct {
		name string
		f    KeyFormat
		typ  string
	}{{"pkcs8.key", PKCS8, "PRIVATE KEY"}, {"sec1.key", SEC1, "EC PRIVATE KEY"}} {
		path := c.WriteKey(t, filepath.Join(dir, tt.name), tt.f)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		if blk == nil || blk.Type != tt.typ {
			t.Fatalf("%s: got %q, want a %s block", tt.name, b, tt.typ)
		}
		var pub any
		if tt.f == SEC1 {
			k, err := x509.ParseECPrivateKey(blk.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			pub = k.Public()
		} else {
			k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			pub = k.(crypto.Signer).Public()
		}
		if !c.Key.PublicKey.Equal(pub) {
			t.Errorf("%s: not the certificate's key", tt.name)
		}
		if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", tt.name, fi.Mode().Perm())
		}
	}
	b, _ := os.ReadFile(c.WriteCert(t, filepath.Join(dir, "a.pem")))
	if blk, _ := pem.Decode(b); blk == nil || blk.Type != "CERTIFICATE" || string(blk.Bytes) != string(c.DER) {
		t.Errorf("a.pem: got %q, want the certificate", b)
	}
}
