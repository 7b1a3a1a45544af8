//go:build linux

package ike

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/internal/charontest"
)

func writePEM(t *testing.T, file, typ string, der ...[]byte) string {
	t.Helper()
	var b []byte
	for _, d := range der {
		b = append(b, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: d})...)
	}
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// loadCerts gives charon its certificate (a.test, issued by ca) and key
// and the CA it trusts, and returns our config as b.test with our
// certificate and key.
func loadCerts(t *testing.T, c *charon, ca *testCert, charonChain []*testCert, ours *testCert, ourChain []*x509.Certificate, remoteID string) *Config {
	t.Helper()
	return loadCertsFull(t, c, ca, charonChain[0], charonChain[1:], ours, ourChain, remoteID)
}

// loadCertsWith is loadCerts with intermediate CAs for charon's chain.
func loadCertsWith(t *testing.T, c *charon, ca, charons *testCert, charonChain []*testCert, ours *testCert, ourChain []*x509.Certificate) *Config {
	t.Helper()
	return loadCertsFull(t, c, ca, charons, charonChain, ours, ourChain, "b.test")
}

func loadCertsFull(t *testing.T, c *charon, ca, charons *testCert, charonChain []*testCert, ours *testCert, ourChain []*x509.Certificate, remoteID string) *Config {
	t.Helper()
	dir := t.TempDir()
	key, err := x509.MarshalPKCS8PrivateKey(charons.Key)
	if err != nil {
		t.Fatal(err)
	}
	certs := writePEM(t, filepath.Join(dir, "a.pem"), "CERTIFICATE", charons.Cert.Raw)
	caFile := writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", ca.Cert.Raw)
	for _, sub := range []string{"private", "x509"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	writePEM(t, filepath.Join(dir, "private", "a.key"), "PRIVATE KEY", key)
	// Intermediates go to x509/: charon may build and send its chain
	// with them, but does not trust them as anchors (x509ca/ would).
	for i, x := range charonChain {
		writePEM(t, filepath.Join(dir, "x509", fmt.Sprintf("inter%d.pem", i)), "CERTIFICATE", x.Cert.Raw)
	}
	conn := testConn("aes256-sha256-x25519", "aes128gcm16")
	conn.Local = charontest.Peer{Auth: "pubkey", ID: "a.test", Certs: certs}
	conn.Remote = charontest.Peer{Auth: "pubkey", ID: remoteID, CACerts: caFile}
	c.LoadDir(conn.String(), dir)
	cfg := peerConfig(t, "aes256-sha256-x25519", "aes128gcm16")
	cfg.PSK = nil
	cfg.LocalAuth, cfg.RemoteAuth = AuthPubkey, AuthPubkey
	cfg.LocalCerts = append([]*x509.Certificate{ours.Cert}, ourChain...)
	cfg.PrivateKey = ours.Key
	cfg.CACerts = []*x509.Certificate{ca.Cert}
	return cfg
}

// bothRoles brings the connection up with us as initiator and then as
// responder, and checks charon's keys and listing, and that charon
// authenticated us by our certificate.
func bothRoles(t *testing.T, ch *charon, d *driver, cfg *Config, wantAuth string) {
	for _, role := range []string{"initiator", "responder"} {
		t.Run(role, func(t *testing.T) { bothRolesOne(t, ch, d, cfg, role, wantAuth) })
	}
}

// bothRolesOne is one role of bothRoles.
func bothRolesOne(t *testing.T, ch *charon, d *driver, cfg *Config, role, wantAuth string) {
	t.Helper()
	from := d.establishChecked(t, ch, cfg, role)
	if d.sa.PeerID().String() != "a.test" {
		t.Errorf("we authenticated charon as %s, want a.test", d.sa.PeerID())
	}
	if !strings.Contains(ch.LogSince(from), wantAuth) {
		t.Errorf("charon's log does not say %q", wantAuth)
	}
	d.while(t, ch, func() bool { return d.sa.State() == StateDeleted }, "--terminate", "--ike", "test", "--timeout", "10")
}

// TestCharonCerts authenticates both sides with certificates against
// charon, in both roles, with RSA and ECDSA keys and RFC 7427
// signatures; charon receives our certificate because we send CERTREQ,
// and we verify its certificate against the CA.
func TestCharonCerts(t *testing.T) {
	ch, d := charonPair(t)
	for _, tc := range []struct {
		k    keyKind
		want string
	}{{"rsa2048", "RSA_EMSA_PKCS1_SHA2_256"}, {"p256", "ECDSA_WITH_SHA256_DER"}, {"p384", "ECDSA_WITH_SHA384_DER"}} {
		k := tc.k
		t.Run(string(k), func(t *testing.T) {
			ca := makeCert(t, testKey(t, k, "ca"), certOpts{CN: "ipsecd test CA", CA: true}, nil)
			a := makeCert(t, testKey(t, k, "a"), certOpts{CN: "a.test", DNS: []string{"a.test"}}, ca)
			b := makeCert(t, testKey(t, k, "b"), certOpts{CN: "b.test", DNS: []string{"b.test"}}, ca)
			cfg := loadCerts(t, ch, ca, []*testCert{a}, b, nil, "b.test")
			bothRoles(t, ch, d, cfg, "authentication of 'b.test' with "+tc.want+" successful")
		})
	}
}

// TestCharonCertsClassic: with charon's signature_authentication off,
// neither side announces RFC 7427, and both sign with the classic
// methods: RSA with SHA-1 (1), ECDSA-256 (9) and ECDSA-384 (10).
func TestCharonCertsClassic(t *testing.T) {
	ch, d := charonPairWith(t, "  signature_authentication = no")
	for _, tc := range []struct {
		k    keyKind
		want string
	}{{"rsa2048", "RSA signature"}, {"p256", "ECDSA-256 signature"}, {"p384", "ECDSA-384 signature"}} {
		t.Run(string(tc.k), func(t *testing.T) {
			ca := makeCert(t, testKey(t, tc.k, "ca"), certOpts{CN: "ipsecd test CA", CA: true}, nil)
			a := makeCert(t, testKey(t, tc.k, "a"), certOpts{CN: "a.test", DNS: []string{"a.test"}}, ca)
			b := makeCert(t, testKey(t, tc.k, "b"), certOpts{CN: "b.test", DNS: []string{"b.test"}}, ca)
			cfg := loadCerts(t, ch, ca, []*testCert{a}, b, nil, "b.test")
			bothRoles(t, ch, d, cfg, "authentication of 'b.test' with "+tc.want+" successful")
		})
	}
}

// TestCharonCertsRefused: charon refuses our certificate from another CA
// and one that has expired; we refuse charon's certificate from another
// CA, and charon's identity when it is not the one we want.
func TestCharonCertsRefused(t *testing.T) {
	ch, d := charonPair(t)
	ca := makeCert(t, testKey(t, "p256", "ca"), certOpts{CN: "ipsecd test CA", CA: true}, nil)
	other := makeCert(t, testKey(t, "p256", "other-ca"), certOpts{CN: "other CA", CA: true}, nil)
	a := makeCert(t, testKey(t, "p256", "a"), certOpts{CN: "a.test", DNS: []string{"a.test"}}, ca)
	aOther := makeCert(t, testKey(t, "p256", "a"), certOpts{CN: "a.test", DNS: []string{"a.test"}}, other)
	b := makeCert(t, testKey(t, "p256", "b"), certOpts{CN: "b.test", DNS: []string{"b.test"}}, ca)
	for _, tc := range []struct {
		name       string
		charons    *testCert
		ours       *testCert
		ourRemote  string
		charonLog  string // what charon's log must say, if it refuses
		wantOurErr string // what our error must say, if we refuse
	}{
		{"our cert from another CA", a, makeCert(t, testKey(t, "p256", "b"), certOpts{CN: "b.test", DNS: []string{"b.test"}}, other), "a.test",
			"no trusted ECDSA public key found for 'b.test'", ""},
		{"our cert expired", a, makeCert(t, testKey(t, "p256", "b"), certOpts{CN: "b.test", DNS: []string{"b.test"},
			NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)}, ca), "a.test",
			"no trusted ECDSA public key found for 'b.test'", ""},
		{"charon's cert from another CA", aOther, b, "a.test", "", "certificate signed by unknown authority"},
		{"charon's identity not the one we want", a, b, "z.test", "", `peer is "a.test", want "z.test"`},
	} {
		for _, role := range []string{"initiator", "responder"} {
			t.Run(tc.name+"/"+role, func(t *testing.T) {
				cfg := loadCerts(t, ch, ca, []*testCert{tc.charons}, tc.ours, nil, "b.test")
				cfg.RemoteID = MustParseIdentity(tc.ourRemote)
				from := ch.LogSize()
				failed := func() bool {
					if d.sa != nil && d.sa.Err() != nil {
						return true // failed, or deleted by charon's AUTHENTICATION_FAILED
					}
					for _, err := range d.errs {
						if errors.Is(err, ErrAuthFailed) {
							return true
						}
					}
					return false
				}
				if role == "initiator" && tc.ourRemote != "a.test" {
					t.Skip("as initiator we name z.test in IDr, and charon refuses before we see its identity")
				}
				d.fail(t, ch, cfg, role, failed)
				if tc.charonLog != "" && !strings.Contains(ch.LogSince(from), tc.charonLog) {
					t.Errorf("charon's log does not say %q", tc.charonLog)
				}
				var ours error
				if d.sa != nil {
					ours = d.sa.Err()
				}
				for _, err := range d.errs {
					if errors.Is(err, ErrAuthFailed) {
						ours = err
					}
				}
				if tc.wantOurErr != "" && (ours == nil || !strings.Contains(ours.Error(), tc.wantOurErr)) {
					t.Errorf("our error %v does not say %q", ours, tc.wantOurErr)
				}
				t.Logf("our error: %v", ours)
				if list, _ := ch.Swanctl("--list-sas"); strings.Contains(list, "ESTABLISHED") {
					t.Fatalf("charon lists an SA after the refusal:\n%s", list)
				}
			})
		}
	}
}
