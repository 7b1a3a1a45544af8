package vici_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	govici "github.com/strongswan/govici/vici"
)

// selfSigned makes a certificate of key, a CA or not.
func selfSigned(t *testing.T, key crypto.Signer, ca bool) *x509.Certificate {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "vici test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		BasicConstraintsValid: true, IsCA: ca}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func call(t *testing.T, sess *govici.Session, cmd string, kv ...string) (*govici.Message, error) {
	t.Helper()
	return sess.Call(context.Background(), cmd, msg(t, kv...))
}

func TestLoadCertKeyGetKeysClearCreds(t *testing.T) {
	_, sess := serve(t, &fakeLoader{}, nil)
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	ca := selfSigned(t, ec, true)
	leaf := selfSigned(t, rk, false)
	caPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}))

	for _, c := range []struct{ typ, flag, data string }{
		{"X509", "CA", caPEM}, {"X509", "NONE", string(leaf.Raw)}, {"x509", "", string(ca.Raw)}} {
		if resp, err := call(t, sess, "load-cert", "type", c.typ, "flag", c.flag, "data", c.data); err != nil {
			t.Errorf("load-cert %s %s: %v %v", c.typ, c.flag, resp, err)
		}
	}
	for _, c := range []struct{ typ, flag, data, want string }{
		{"X509", "CA", string(leaf.Raw), "lacks CA basic constraint"},
		{"X509_CRL", "", string(ca.Raw), `type "X509_CRL" is not supported`},
		{"X509", "", "junk", "parsing X509 certificate failed"},
		{"X509", "", "", "certificate data missing"},
		{"X509", "OCSP", string(ca.Raw), `flag "OCSP"`},
	} {
		resp, err := call(t, sess, "load-cert", "type", c.typ, "flag", c.flag, "data", c.data)
		if err == nil || !strings.Contains(resp.Get("errmsg").(string), c.want) {
			t.Errorf("load-cert %s %s: %v, want an errmsg with %q", c.typ, c.flag, resp, c.want)
		}
	}

	// charon's id of an ECDSA key: the SHA-1 of its point, uncompressed
	// (the subjectPublicKey's bits).
	point, _ := ec.PublicKey.ECDH()
	ecID := sha1.Sum(point.Bytes())
	ecDER, _ := x509.MarshalECPrivateKey(ec)
	rsaPKCS8, _ := x509.MarshalPKCS8PrivateKey(rk)
	ids := []string{}
	for _, c := range []struct {
		typ, data, want string
	}{
		{"ecdsa", string(ecDER), hex.EncodeToString(ecID[:])},
		{"any", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: rsaPKCS8})), ""},
		{"ecdsa", string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: ecDER})), hex.EncodeToString(ecID[:])},
	} {
		resp, err := call(t, sess, "load-key", "type", c.typ, "data", c.data)
		if err != nil {
			t.Fatalf("load-key %s: %v %v", c.typ, resp, err)
		}
		id, _ := resp.Get("id").(string)
		if len(id) != 40 || (c.want != "" && id != c.want) {
			t.Errorf("load-key %s: id %q, want %q ", c.typ, id, c.want)
		}
		ids = append(ids, id)
	}
	for _, c := range []struct{ typ, data, want string }{
		{"rsa", string(ecDER), "another type of key"},
		{"ed25519", string(ecDER), `key type "ed25519" is not supported`},
		{"", string(ecDER), "key type missing"},
		{"any", "junk", "parsing any private key failed"},
		{"ecdsa", "", "key data missing"},
	} {
		resp, err := call(t, sess, "load-key", "type", c.typ, "data", c.data)
		if err == nil || !strings.Contains(resp.Get("errmsg").(string), c.want) || strings.Contains(resp.Get("errmsg").(string), string(ecDER)) {
			t.Errorf("load-key %s: %v, want an errmsg with %q", c.typ, resp, c.want)
		}
	}
	resp, err := call(t, sess, "get-keys")
	if got := resp.Get("keys"); err != nil || strings.Join(got.([]string), ",") != ids[0]+","+ids[1] {
		t.Errorf("get-keys: %v %v, want [%s %s] (the same key loaded twice once)", resp, err, ids[0], ids[1])
	}
	if resp, err := call(t, sess, "unload-key", "id", ids[1]); err != nil {
		t.Errorf("unload-key: %v %v", resp, err)
	}
	if resp, err := call(t, sess, "unload-key", "id", ids[1]); err == nil || !strings.Contains(resp.Get("errmsg").(string), "no key "+ids[1]) {
		t.Errorf("unload-key of a key gone: %v %v", resp, err)
	}
	if resp, err := call(t, sess, "get-keys"); err != nil || strings.Join(resp.Get("keys").([]string), ",") != ids[0] {
		t.Errorf("get-keys after unload-key: %v %v, want [%s]", resp, err, ids[0])
	}
	if _, err := call(t, sess, "clear-creds"); err != nil {
		t.Fatal(err)
	}
	if resp, err := call(t, sess, "get-keys"); err != nil || len(resp.Get("keys").([]string)) != 0 {
		t.Errorf("get-keys after clear-creds: %v %v", resp, err)
	}
}
