package vici_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/config"
)

// issued makes a certificate for the DNS name name, issued by ca's key.
func issued(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, key
}

// TestListCerts: list-certs streams a list-cert event per certificate
// held, those of load-cert and those of the connections (the file's),
// each once, end entities before CAs, as charon: type, flag, has_privkey
// where a private key of its public key is held, data the DER; type,
// flag and subject select; a bad type, flag or subject is refused.
func TestListCerts(t *testing.T) {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := selfSigned(t, caKey, true)
	fileLeaf, fileKey := issued(t, ca, caKey, "file.test")
	viciLeaf, viciKey := issued(t, ca, caKey, "vici.test")
	other, _ := issued(t, ca, caKey, "nokey.test")
	f := &fakeLoader{}
	f.fakeIKE.conns = []config.Connection{{Name: "file", Local: config.Endpoint{Certs: []*x509.Certificate{fileLeaf}, PrivateKey: fileKey},
		Remote: config.Endpoint{CACertList: []*x509.Certificate{ca}}}}
	_, sess := serve(t, f, nil)
	keyDER, _ := x509.MarshalPKCS8PrivateKey(viciKey)
	for _, c := range [][]string{
		{"load-cert", "type", "X509", "flag", "CA", "data", string(ca.Raw)}, // the file's CA again: listed once
		{"load-cert", "type", "X509", "flag", "NONE", "data", string(viciLeaf.Raw)},
		{"load-cert", "type", "X509", "flag", "NONE", "data", string(other.Raw)},
		{"load-key", "type", "ecdsa", "data", string(keyDER)},
	} {
		if resp, err := call(t, sess, c[0], c[1:]...); err != nil {
			t.Fatalf("%s: %v %v", c[0], resp, err)
		}
	}
	names := map[string]string{string(ca.Raw): "ca", string(fileLeaf.Raw): "file", string(viciLeaf.Raw): "vici", string(other.Raw): "nokey"}
	list := func(kv ...string) string {
		t.Helper()
		var out []string
		for _, ev := range streamed(t, sess, "list-certs", "list-cert", msg(t, kv...)) {
			s := names[ev.Get("data").(string)] + ":" + ev.Get("type").(string) + "/" + ev.Get("flag").(string)
			if ev.Get("has_privkey") == "yes" {
				s += "+key"
			}
			out = append(out, s)
		}
		return strings.Join(out, " ")
	}
	for _, tt := range []struct {
		kv   []string
		want string
	}{
		{nil, "vici:X509/NONE+key nokey:X509/NONE file:X509/NONE+key ca:X509/CA"},
		{[]string{"type", "X509", "flag", "CA"}, "ca:X509/CA"},
		{[]string{"type", "x509", "flag", "none"}, "vici:X509/NONE+key nokey:X509/NONE file:X509/NONE+key"},
		{[]string{"type", "x509ca"}, "ca:X509/CA"},
		{[]string{"type", "ANY", "subject", "file.test"}, "file:X509/NONE+key"},
		{[]string{"subject", "CN=vici test"}, "ca:X509/CA"},
		{[]string{"type", "X509_CRL"}, ""},
		{[]string{"type", "PUBKEY"}, ""},
	} {
		if got := list(tt.kv...); got != tt.want {
			t.Errorf("list-certs %v:\n got %s\nwant %s", tt.kv, got, tt.want)
		}
	}
	for _, tt := range []struct{ kv []string }{
		{[]string{"type", "X509_PGP"}}, {[]string{"type", "X509", "flag", "ROOT"}}, {[]string{"subject", "CN=a, XX=b"}},
	} {
		resp, err := call(t, sess, "list-certs", tt.kv...)
		if err == nil || resp.Get("success") != "no" || !strings.HasPrefix(resp.Get("errmsg").(string), "list-certs: ") {
			t.Errorf("list-certs %v: %v %v; want refused", tt.kv, resp, err)
		}
	}
}
