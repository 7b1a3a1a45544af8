package ike

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/ike/message"
)

// TestCertAuth establishes IKE SAs authenticated with certificates, both
// sides signing, for RSA and ECDSA keys, with RFC 7427 signatures and
// with the classic methods.
func TestCertAuth(t *testing.T) {
	for _, k := range []keyKind{"rsa2048", "p256", "p384", "p521"} {
		for _, classic := range []bool{false, true} {
			name := string(k) + "/rfc7427"
			if classic {
				name = string(k) + "/classic"
			}
			t.Run(name, func(t *testing.T) {
				ci, cr, _ := certPairConfigs(t, k)
				ci.ClassicSignatures = classic
				ini, res, errI, errR := run(t, ci, cr)
				if errI != nil || errR != nil {
					t.Fatalf("initiator: %v; responder: %v", errI, errR)
				}
				checkPair(t, ini, res)
				if ini.PeerID().String() != "b.test" || res.PeerID().String() != "a.test" {
					t.Fatalf("peer ids %s and %s, want b.test and a.test", ini.PeerID(), res.PeerID())
				}
			})
		}
	}
}

// TestSignMethods checks which AUTH method each key signs with, and that
// the signature verifies with the certificate's key only.
func TestSignMethods(t *testing.T) {
	octets := []byte("IKE_SA_INIT | nonce | prf(SK_p, ID)")
	all := []uint16{message.HashSHA256, message.HashSHA384, message.HashSHA512}
	for _, tt := range []struct {
		key    keyKind
		hashes []uint16
		want   message.AuthMethod
	}{
		{"rsa2048", all, message.AuthDigitalSig},
		{"rsa2048", nil, message.AuthRSA},
		{"rsa2048", []uint16{message.HashSHA1}, message.AuthRSA},
		{"p256", all, message.AuthDigitalSig},
		{"p256", nil, message.AuthECDSA256},
		{"p384", nil, message.AuthECDSA384},
		{"p384", []uint16{message.HashSHA256}, message.AuthDigitalSig},
		{"p521", nil, message.AuthECDSA521},
	} {
		key := testKey(t, tt.key, "a")
		m, sig, err := sign(key, octets, tt.hashes, nil)
		if err != nil {
			t.Fatal(err)
		}
		if m != tt.want {
			t.Errorf("%s with peer hashes %v: method %d, want %d", tt.key, tt.hashes, m, tt.want)
		}
		if err := verifySignature(key.Public(), m, sig, octets); err != nil {
			t.Errorf("%s method %d: %v", tt.key, m, err)
		}
		if err := verifySignature(key.Public(), m, sig, append(octets, 0)); err == nil {
			t.Errorf("%s method %d: a signature over other octets verifies", tt.key, m)
		}
		other := testKey(t, tt.key, "b")
		if err := verifySignature(other.Public(), m, sig, octets); err == nil {
			t.Errorf("%s method %d: verifies with another key", tt.key, m)
		}
	}
}

// TestCertRefused: a certificate from another CA, an expired one, one
// that does not prove the claimed identity and an identity other than the
// configured one are refused with AUTHENTICATION_FAILED and an error that
// says which.
func TestCertRefused(t *testing.T) {
	for _, tt := range []struct {
		name  string
		setup func(t *testing.T, ci, cr *Config, ca *testCert)
		want  string
	}{
		{"wrong CA", func(t *testing.T, ci, cr *Config, ca *testCert) {
			other := makeCert(t, testKey(t, "p256", "other-ca"), certOpts{CN: "other CA", CA: true}, nil)
			c := makeCert(t, testKey(t, "p256", "a"), certOpts{CN: "a.test", DNS: []string{"a.test"}}, other)
			ci.LocalCerts, ci.PrivateKey = []*x509.Certificate{c.Cert}, c.Key
		}, "certificate signed by unknown authority"},
		{"expired", func(t *testing.T, ci, cr *Config, ca *testCert) {
			c := makeCert(t, testKey(t, "p256", "a"), certOpts{CN: "a.test", DNS: []string{"a.test"},
				NotBefore: t0.Add(-48 * time.Hour), NotAfter: t0.Add(-24 * time.Hour)}, ca)
			ci.LocalCerts, ci.PrivateKey = []*x509.Certificate{c.Cert}, c.Key
		}, "expired"},
		{"identity not in the certificate", func(t *testing.T, ci, cr *Config, ca *testCert) {
			c := makeCert(t, testKey(t, "p256", "a"), certOpts{CN: "c.test", DNS: []string{"c.test"}}, ca)
			ci.LocalCerts, ci.PrivateKey = []*x509.Certificate{c.Cert}, c.Key
			// A certificate for c.test that claims a.test: Validate
			// refuses that locally, so runUnchecked sets the SA's id after
			// Initiate validated c.test.
			ci.LocalID = MustParseIdentity("c.test")
			cr.RemoteID = Identity{}
		}, "does not contain"},
		{"identity not the configured one", func(t *testing.T, ci, cr *Config, ca *testCert) {
			cr.RemoteID = MustParseIdentity("x.test")
		}, `want "x.test"`},
		{"a PSK where a certificate is wanted", func(t *testing.T, ci, cr *Config, ca *testCert) {
			ci.LocalAuth, ci.PSK = AuthPSK, []byte("a-test-psk-not-a-secret")
		}, "pre-shared key"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ci, cr, ca := certPairConfigs(t, "p256")
			tt.setup(t, ci, cr, ca)
			ini, res, errI, errR := runUnchecked(t, ci, cr, func(ini *SA) {
				if ini.localID.String() == "c.test" {
					ini.localID = MustParseIdentity("a.test")
				}
			})
			if !errors.Is(errR, ErrAuthFailed) || !strings.Contains(errR.Error(), tt.want) {
				t.Fatalf("responder: %v; want ErrAuthFailed saying %q", errR, tt.want)
			}
			if !errors.Is(errI, ErrAuthFailed) {
				t.Fatalf("initiator: %v; want ErrAuthFailed", errI)
			}
			if len(res.Children()) != 0 || len(ini.Children()) != 0 || res.State() != StateFailed {
				t.Fatalf("states %v and %v with %d and %d children after a refusal", ini.State(), res.State(), len(ini.Children()), len(res.Children()))
			}
		})
	}
}

// TestCertResponderRefusesInitiator: the initiator refuses a responder
// whose certificate comes from another CA, and tells it.
func TestCertResponderRefused(t *testing.T) {
	ci, cr, _ := certPairConfigs(t, "rsa2048")
	other := makeCert(t, testKey(t, "rsa2048", "other-ca"), certOpts{CN: "other CA", CA: true}, nil)
	c := makeCert(t, testKey(t, "rsa2048", "b"), certOpts{CN: "b.test", DNS: []string{"b.test"}}, other)
	cr.LocalCerts, cr.PrivateKey = []*x509.Certificate{c.Cert}, c.Key
	ini, _, _, _ := run(t, ci, cr)
	if errI := ini.Err(); !errors.Is(errI, ErrAuthFailed) || !strings.Contains(errI.Error(), "unknown authority") || ini.State() != StateFailed {
		t.Fatalf("initiator: %v, state %v; want ErrAuthFailed for an unknown authority", ini.Err(), ini.State())
	}
}

// TestCertIdentities: identities proven by the subject DN (the default
// local id with a certificate, or a configured DN), an e-mail address and
// an IP address, and "%any" accepting whatever the certificate proves.
func TestCertIdentities(t *testing.T) {
	for _, tt := range []struct {
		name            string
		opts            certOpts
		localID, remote string
		wantPeer        string
	}{
		{"subject DN by default", certOpts{CN: "a.test"}, "", "C=CH, O=ipsecd test, CN=a.test", "C=CH, O=ipsecd test, CN=a.test"},
		{"subject DN against %any", certOpts{CN: "a.test"}, "", "%any", "C=CH, O=ipsecd test, CN=a.test"},
		{"DN written by hand", certOpts{CN: "a.test"}, "c=ch,o=ipsecd test,cn=a.test", "C=CH, O=ipsecd test, CN=a.test", "C=CH, O=ipsecd test, CN=a.test"},
		{"e-mail", certOpts{CN: "a", Email: []string{"a@example.test"}}, "a@example.test", "a@example.test", "a@example.test"},
		{"IPv6", certOpts{CN: "a", IPs: []string{"2001:db8::1"}}, "2001:db8::1", "%any", "2001:db8::1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ci, cr, ca := certPairConfigs(t, "p256")
			c := makeCert(t, testKey(t, "p256", "a"), tt.opts, ca)
			ci.LocalCerts, ci.LocalID = []*x509.Certificate{c.Cert}, MustParseIdentity(tt.localID)
			cr.RemoteID = MustParseIdentity(tt.remote)
			ini, res, errI, errR := run(t, ci, cr)
			if errI != nil || errR != nil {
				t.Fatalf("initiator: %v; responder: %v", errI, errR)
			}
			checkPair(t, ini, res)
			if res.PeerID().String() != tt.wantPeer {
				t.Fatalf("peer id %s, want %q", res.PeerID(), tt.wantPeer)
			}
		})
	}
}

// TestCertValidate: Validate refuses a key that is not the certificate's,
// a local id the certificate does not prove, and pubkey without cacerts.
func TestCertValidate(t *testing.T) {
	for _, tt := range []struct {
		name  string
		setup func(c *Config)
		want  string
	}{
		{"other key", func(c *Config) { c.PrivateKey = testKey(t, "p256", "b") }, "not the key of the local certificate"},
		{"unproven id", func(c *Config) { c.LocalID = MustParseIdentity("z.test") }, "neither the subject nor a subjectAltName"},
		{"no cacerts", func(c *Config) { c.CACerts = nil }, "needs cacerts"},
		{"no cert", func(c *Config) { c.LocalCerts = nil }, "needs a certificate"},
		{"bad auth", func(c *Config) { c.RemoteAuth = "eap-gtc" }, `auth "eap-gtc"`},
		{"eap-only without an EAP client", func(c *Config) { c.RemoteAuth = AuthEAPOnly }, `remote auth eap (the gateway proves itself by EAP alone) needs local auth eap-mschapv2 or eap-tls`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, _, _ := certPairConfigs(t, "p256")
			tt.setup(c)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate: %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

// TestCertChainAndCertReq: a certificate issued by an intermediate CA is
// sent with the intermediate when the peer trusts only the root, and
// alone when the peer's CERTREQ names the intermediate.
func TestCertChainAndCertReq(t *testing.T) {
	ci, cr, root := certPairConfigs(t, "p256")
	inter := makeCert(t, testKey(t, "p256", "inter"), certOpts{CN: "intermediate", CA: true}, root)
	leaf := makeCert(t, testKey(t, "p256", "a"), certOpts{CN: "a.test", DNS: []string{"a.test"}}, inter)
	ci.LocalCerts = []*x509.Certificate{leaf.Cert, inter.Cert}
	if got := ci.certPayloads(nil); len(got) != 2 {
		t.Fatalf("without CERTREQ: %d CERT payloads, want 2", len(got))
	}
	if got := ci.certPayloads([][]byte{keyHash(root.Cert)}); len(got) != 2 {
		t.Fatalf("CERTREQ for the root: %d CERT payloads, want 2", len(got))
	}
	if got := ci.certPayloads([][]byte{keyHash(inter.Cert)}); len(got) != 1 || !bytes.Equal(message.Cert(got[0].Body).Data(), leaf.Cert.Raw) {
		t.Fatalf("CERTREQ for the intermediate: %d CERT payloads, want the leaf alone", len(got))
	}
	ini, res, errI, errR := run(t, ci, cr)
	if errI != nil || errR != nil {
		t.Fatalf("through an intermediate: initiator: %v; responder: %v", errI, errR)
	}
	checkPair(t, ini, res)
	// The responder's CERTREQ in IKE_SA_INIT named the root it trusts
	// (the initiator keeps it for IKE_AUTH only).
	ini, req, _ := Initiate(ci, addrA, addrB, t0)
	_, resp, _ := Respond(cr, addrB, addrA, req, t0)
	if _, err := ini.Handle(resp, t0); err != nil {
		t.Fatal(err)
	}
	if got := ini.hs.peerCertReq; len(got) != 1 || !bytes.Equal(got[0], keyHash(root.Cert)) {
		t.Fatalf("initiator saw CERTREQ %x, want the root's key hash", got)
	}
}

// TestParsePrivateKeyPEM reads keys as PKCS#1, SEC1 and PKCS#8, and
// refuses encrypted ones without echoing them.
func TestParsePrivateKeyPEM(t *testing.T) {
	rsaKey := testKey(t, "rsa2048", "a")
	ecKey := testKey(t, "p384", "a")
	pkcs8 := func(k any) []byte {
		b, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	sec1, err := x509.MarshalECPrivateKey(ecKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, typ string
		der       []byte
		want      crypto.Signer
	}{
		{"PKCS#1", "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsaKey.(*rsa.PrivateKey)), rsaKey},
		{"PKCS#8 RSA", "PRIVATE KEY", pkcs8(rsaKey), rsaKey},
		{"SEC1", "EC PRIVATE KEY", sec1, ecKey},
		{"PKCS#8 ECDSA", "PRIVATE KEY", pkcs8(ecKey), ecKey},
	} {
		b := pem.EncodeToMemory(&pem.Block{Type: tt.typ, Bytes: tt.der})
		k, err := ParsePrivateKeyPEM(append([]byte("comment\n"), b...))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if !k.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(tt.want.Public()) {
			t.Fatalf("%s: another key came out", tt.name)
		}
	}
	enc := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-128-CBC,00"}, Bytes: []byte("secret-bytes")})
	if _, err := ParsePrivateKeyPEM(enc); err == nil || !strings.Contains(err.Error(), "encrypted") || strings.Contains(err.Error(), "secret") {
		t.Fatalf("encrypted key: %v", err)
	}
	if _, err := ParsePrivateKeyPEM([]byte("nothing")); err == nil {
		t.Fatal("no key: no error")
	}
}

// TestCertIdentityFoldsASCIIOnly: a certificate proves its own names and
// those that differ from them in ASCII case only. Unicode case folding
// would make the Kelvin sign (U+212A) a "k" and the long s (U+017F) an
// "s": a certificate the CA issued for "CN=\u212Aarl" authenticated as
// the configured "CN=karl", and one for "a.test" proved "a.te\u017Ft".
func TestCertIdentityFoldsASCIIOnly(t *testing.T) {
	for _, tt := range []struct {
		name                 string
		opts                 certOpts
		ownID, claim, remote string
		want                 string
	}{
		{"a DN with the Kelvin sign for the configured k", certOpts{CN: "\u212Aarl"}, "", "", "C=CH, O=ipsecd test, CN=karl", `want "C=CH, O=ipsecd test, CN=karl"`},
		{"a name with the long s for the certificate's s", certOpts{CN: "a", DNS: []string{"a.test"}}, "a.test", "a.te\u017Ft", "%any", "does not contain"},
		{"an e-mail address with the Kelvin sign", certOpts{CN: "a", Email: []string{"k@example.test"}}, "k@example.test", "\u212A@example.test", "%any", "does not contain"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ci, cr, ca := certPairConfigs(t, "p256")
			c := makeCert(t, testKey(t, "p256", "a"), tt.opts, ca)
			ci.LocalCerts, ci.LocalID = []*x509.Certificate{c.Cert}, MustParseIdentity(tt.ownID)
			cr.RemoteID = MustParseIdentity(tt.remote)
			_, res, _, errR := runUnchecked(t, ci, cr, func(ini *SA) {
				if tt.claim != "" {
					ini.localID = MustParseIdentity(tt.claim) // Validate refuses it locally
				}
			})
			if !errors.Is(errR, ErrAuthFailed) || !strings.Contains(errR.Error(), tt.want) {
				t.Fatalf("responder: %v (peer %s, state %v); want ErrAuthFailed saying %q", errR, res.PeerID(), res.State(), tt.want)
			}
		})
	}
}

// TestCertPinned: with PeerCerts (remote.certs) only that certificate
// authenticates the peer: another of the same CA, for the same identity,
// is refused; pinned alone (no CACerts) it is its own trust anchor, but
// must still be valid now.
func TestCertPinned(t *testing.T) {
	for _, tt := range []struct {
		name  string
		setup func(t *testing.T, ci, cr *Config, ca *testCert)
		want  string // "" : established
	}{
		{"pinned, with the CA", func(t *testing.T, ci, cr *Config, ca *testCert) {
			cr.PeerCerts = ci.LocalCerts[:1]
		}, ""},
		{"pinned alone", func(t *testing.T, ci, cr *Config, ca *testCert) {
			cr.PeerCerts, cr.CACerts = ci.LocalCerts[:1], nil
		}, ""},
		{"another certificate of the same CA", func(t *testing.T, ci, cr *Config, ca *testCert) {
			other := makeCert(t, testKey(t, "p256", "a2"), certOpts{CN: "a.test", DNS: []string{"a.test"}}, ca)
			cr.PeerCerts = []*x509.Certificate{other.Cert}
		}, "not the certificate pinned for this peer"},
		{"another, pinned alone", func(t *testing.T, ci, cr *Config, ca *testCert) {
			other := makeCert(t, testKey(t, "p256", "a2"), certOpts{CN: "a.test", DNS: []string{"a.test"}}, ca)
			cr.PeerCerts, cr.CACerts = []*x509.Certificate{other.Cert}, nil
		}, "not the certificate pinned for this peer"},
		{"pinned alone, expired", func(t *testing.T, ci, cr *Config, ca *testCert) {
			c := makeCert(t, testKey(t, "p256", "a"), certOpts{CN: "a.test", DNS: []string{"a.test"},
				NotBefore: t0.Add(-48 * time.Hour), NotAfter: t0.Add(-24 * time.Hour)}, ca)
			ci.LocalCerts, ci.PrivateKey = []*x509.Certificate{c.Cert}, c.Key
			cr.PeerCerts, cr.CACerts = ci.LocalCerts, nil
		}, "expired"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ci, cr, ca := certPairConfigs(t, "p256")
			tt.setup(t, ci, cr, ca)
			ini, res, errI, errR := runUnchecked(t, ci, cr, func(*SA) {})
			if tt.want == "" {
				if errI != nil || errR != nil {
					t.Fatalf("initiator: %v; responder: %v", errI, errR)
				}
				checkPair(t, ini, res)
				return
			}
			if !errors.Is(errR, ErrAuthFailed) || !strings.Contains(errR.Error(), tt.want) {
				t.Fatalf("responder: %v; want ErrAuthFailed saying %q", errR, tt.want)
			}
			if res.State() != StateFailed || len(res.Children()) != 0 {
				t.Fatalf("responder %v with %d children after a refusal", res.State(), len(res.Children()))
			}
		})
	}
	_, cr, _ := certPairConfigs(t, "p256")
	cr.CACerts = nil
	if err := cr.Validate(); err == nil || !strings.Contains(err.Error(), "needs cacerts (trust anchors) or certs") {
		t.Errorf("remote pubkey with neither cacerts nor certs: %v", err)
	}
}
