package ike

import (
	"crypto/x509"
	"errors"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/ike/eap"
	"github.com/ipsecd/ipsecd/ike/message"
)

// eapTLSConfigs are a road warrior a.test of local auth eap-tls (its
// certificate names a.test, its EAP identity) and our gateway b.test of
// a certificate, remote auth eap-tls, both of one CA.
func eapTLSConfigs(t testing.TB) (ci, cr *Config) {
	t.Helper()
	ci, cr, _ = certPairConfigs(t, "p256")
	ci.LocalAuth = AuthEAPTLS
	cr.RemoteAuth = AuthEAPTLS
	mustValidate(t, ci, cr)
	return ci, cr
}

// mustValidate fails the test if a config is not valid.
func mustValidate(t testing.TB, cs ...*Config) {
	t.Helper()
	for _, c := range cs {
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEAPTLSEngine: our road warrior proves itself with its certificate
// inside EAP-TLS to our gateway, which proves itself with its IKE
// certificate (AUTH) and in TLS; both AUTHs after EAP-Success are keyed
// by the TLS MSK, so that the pair comes up only if both derived the same.
func TestEAPTLSEngine(t *testing.T) {
	ci, cr := eapTLSConfigs(t)
	ini, res, errI, errR := run(t, ci, cr)
	if errI != nil || errR != nil {
		t.Fatal(errI, errR)
	}
	checkPair(t, ini, res)
	if res.EAPIdentity() != "a.test" || res.PeerAuth() != AuthEAPTLS || ini.PeerAuth() != AuthPubkey {
		t.Errorf("gateway saw %q by %s; client saw the gateway by %s", res.EAPIdentity(), res.PeerAuth(), ini.PeerAuth())
	}
	if ini.hs != nil || res.hs != nil {
		t.Error("the handshake state outlived the establishment")
	}
}

// TestEAPTLSEngineRefuses: a client certificate of another CA, and an EAP
// identity the certificate does not name, fail both sides with
// ErrAuthFailed; the gateway's error is an EAP-TLS AuthError naming the
// identity.
func TestEAPTLSEngineRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, identity, want string
		mod                  func(t *testing.T, ci *Config)
		forge                func(ini *SA)
	}{
		{"other CA", "a.test", "certificate signed by unknown authority", func(t *testing.T, ci *Config) {
			ca := makeCert(t, testKey(t, "p256", "other-ca"), certOpts{CN: "another CA", CA: true}, nil)
			c := makeCert(t, testKey(t, "p256", "a"), certOpts{CN: "a.test", DNS: []string{"a.test"}}, ca)
			ci.LocalCerts = []*x509.Certificate{c.Cert}
		}, func(*SA) {}},
		{"identity not in the certificate", "carol.test", `EAP identity "carol.test" is neither the subject nor a subjectAltName`, func(*testing.T, *Config) {}, func(ini *SA) {
			ini.cfg.LocalEAPID = "carol.test" // past Validate, which refuses it
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ci, cr := eapTLSConfigs(t)
			tc.mod(t, ci)
			ini, res, _, _ := runUnchecked(t, ci, cr, tc.forge)
			if ini.State() != StateFailed || res.State() != StateFailed {
				t.Fatalf("states %v and %v, want both failed (%v, %v)", ini.State(), res.State(), ini.Err(), res.Err())
			}
			var ae *eap.AuthError
			err := res.Err()
			if !errors.Is(err, ErrAuthFailed) || !errors.As(err, &ae) || ae.Method != message.EAPTLS || ae.Identity != tc.identity || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("gateway's error %v, want an EAP-TLS AuthError of %q saying %q", err, tc.identity, tc.want)
			}
			if !errors.Is(ini.Err(), ErrAuthFailed) {
				t.Errorf("client's error %v, want ErrAuthFailed", ini.Err())
			}
		})
	}
}

// eapOnlyConfigs are eapTLSConfigs or eapClientConfigs (EAP-MSCHAPv2)
// with the gateway proving itself by EAP alone (local auth eap) and the
// client accepting that (remote auth eap).
func eapOnlyConfigs(t testing.TB, auth AuthClass) (ci, cr *Config) {
	t.Helper()
	if auth == AuthEAPTLS {
		ci, cr = eapTLSConfigs(t)
	} else {
		ci, cr = eapClientConfigs(t, auth, "alice-pw")
	}
	ci.RemoteAuth, cr.LocalAuth = AuthEAPOnly, AuthEAPOnly
	if auth != AuthEAPTLS {
		cr.LocalCerts, cr.PrivateKey = nil, nil // nothing to sign with: the proof is the method's
	}
	mustValidate(t, ci, cr)
	return ci, cr
}

// TestEAPOnly: RFC 5998 with EAP-TLS and EAP-MSCHAPv2: the gateway sends
// no AUTH before EAP (the client records it as proven by eap, which it
// does only for a first response without AUTH), and both come up on the
// MSK-keyed AUTHs. A client that wants the gateway's certificate (remote
// auth pubkey) refuses such a gateway.
func TestEAPOnly(t *testing.T) {
	for _, auth := range []AuthClass{AuthEAPTLS, AuthEAPMSCHAPv2} {
		t.Run(string(auth), func(t *testing.T) {
			ci, cr := eapOnlyConfigs(t, auth)
			ini, res, errI, errR := run(t, ci, cr)
			if errI != nil || errR != nil {
				t.Fatal(errI, errR)
			}
			checkPair(t, ini, res)
			if ini.PeerAuth() != AuthEAPOnly || ini.PeerID().String() != "b.test" || res.PeerAuth() != auth {
				t.Errorf("client saw %s by %s, want b.test by eap; gateway saw the client by %s", ini.PeerID(), ini.PeerAuth(), res.PeerAuth())
			}

			ci.RemoteAuth = AuthPubkey
			ini, _, errI, _ = run(t, ci, cr)
			if ini.State() != StateFailed || !errors.Is(errI, ErrAuthFailed) || !strings.Contains(errI.Error(), "no IDr or AUTH payload") {
				t.Errorf("a client of remote auth pubkey: %v (%v), want it to refuse the gateway's missing AUTH", ini.State(), errI)
			}
		})
	}
}

// TestEAPOnlyNeedsNotify: a gateway of local auth eap refuses a client
// whose IKE_AUTH request lacks EAP_ONLY_AUTHENTICATION (strongSwan's
// "peer does not support it"), with AUTHENTICATION_FAILED.
func TestEAPOnlyNeedsNotify(t *testing.T) {
	ci, cr := eapOnlyConfigs(t, AuthEAPMSCHAPv2)
	ini, res, reply := initPair(t, ci, cr)
	if _, err := ini.Handle(reply, t0); err != nil { // builds our request, which is not sent
		t.Fatal(err)
	}
	// The request as a client that knows nothing of RFC 5998 makes it.
	req, err := ini.sealed(ini.header(message.IKEAuth, 1, false), []message.Payload{
		{Type: message.TypeIDi, Body: ini.localID.payload()},
		{Type: message.TypeSA, Body: message.AppendSA(nil, ini.childProposals(ini.hs.childInSPI))},
		{Type: message.TypeTSi, Body: message.AppendTS(nil, prefixSelectors(ci.Child.LocalTS))},
		{Type: message.TypeTSr, Body: message.AppendTS(nil, prefixSelectors(ci.Child.RemoteTS))},
	})
	if err != nil {
		t.Fatal(err)
	}
	answer, err := res.Handle(req, t0)
	if res.State() != StateFailed || !errors.Is(err, ErrAuthFailed) || !strings.Contains(err.Error(), "did not send EAP_ONLY_AUTHENTICATION") {
		t.Fatalf("gateway %v (%v), want it to refuse a client without EAP_ONLY_AUTHENTICATION", res.State(), err)
	}
	ps := openResponse(t, ini, answer)
	if _, ok := notifyOf(ps, message.AuthenticationFailed); !ok || message.Get(ps, message.TypeEAP) != nil {
		t.Errorf("answer %v, want AUTHENTICATION_FAILED and no EAP", ps)
	}
}

// TestEAPOnlyValidate: EAP-MD5 proves nothing of the gateway and makes no
// MSK: neither side takes it with EAP-only, nor EAP relayed to RADIUS,
// whose method is not known; EAP-only with EAP-TLS needs the gateway's
// certificate.
func TestEAPOnlyValidate(t *testing.T) {
	ci, cr := eapOnlyConfigs(t, AuthEAPMSCHAPv2)
	for _, tc := range []struct {
		name string
		c    *Config
		mod  func(c *Config)
		want string
	}{
		{"gateway md5", cr, func(c *Config) { c.RemoteAuth = AuthEAPMD5 }, `needs remote auth eap-mschapv2 or eap-tls, a method that proves us to the client; "eap-md5" does not`},
		{"gateway radius", cr, func(c *Config) { c.RemoteAuth = AuthEAPRADIUS }, `"eap-radius" does not`},
		{"gateway tls without a certificate", cr, func(c *Config) { c.RemoteAuth, c.CACerts = AuthEAPTLS, []*x509.Certificate{{}} }, "needs our certificate and key"},
		{"client md5", ci, func(c *Config) { c.LocalAuth = AuthEAPMD5 }, "EAP-only authentication (RFC 5998) needs a method that proves the gateway"},
		{"client pubkey", ci, func(c *Config) { c.LocalAuth = AuthPubkey }, `remote auth eap (the gateway proves itself by EAP alone) needs local auth eap-mschapv2 or eap-tls, not "pubkey"`},
	} {
		c := *tc.c
		tc.mod(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// FuzzEAPOnlyGateway: a client sends an EAP-only gateway (local auth
// eap, remote auth eap-tls) whatever first IKE_AUTH request it likes,
// authenticated: the gateway answers or refuses it without panicking,
// and is never established by it.
func FuzzEAPOnlyGateway(f *testing.F) {
	ci, cr := eapOnlyConfigs(f, AuthEAPTLS)
	ok, _ := message.AppendPayloads(nil, []message.Payload{
		{Type: message.TypeIDi, Body: ci.LocalID.payload()},
		{Type: message.TypeN, Body: message.AppendNotify(nil, 0, message.EAPOnlyAuthentication, nil, nil)},
		{Type: message.TypeIDr, Body: ci.RemoteID.payload()},
	})
	f.Add(uint8(message.TypeIDi), ok)
	withAuth, _ := message.AppendPayloads(nil, []message.Payload{
		{Type: message.TypeIDi, Body: ci.LocalID.payload()},
		{Type: message.TypeAUTH, Body: message.AppendAuth(nil, message.AuthSharedKey, make([]byte, 32))},
	})
	f.Add(uint8(message.TypeIDi), withAuth)
	f.Fuzz(func(t *testing.T, first uint8, chain []byte) {
		ini, res, reply := initPair(t, ci, cr)
		if _, err := ini.Handle(reply, t0); err != nil {
			t.Fatal(err)
		}
		req, err := ini.seal.Seal(ini.header(message.IKEAuth, 1, false), message.PayloadType(first), chain)
		if err != nil {
			return
		}
		res.Handle(req, t0)
		if res.State() == StateEstablished {
			t.Fatal("the gateway is established by one request")
		}
	})
}

// initPair runs IKE_SA_INIT's request from ci to cr and returns both SAs
// and the responder's answer, not yet handled.
func initPair(t testing.TB, ci, cr *Config) (ini, res *SA, reply []byte) {
	t.Helper()
	ini, msg, err := Initiate(ci, addrA, addrB, t0)
	if err != nil {
		t.Fatal(err)
	}
	res, reply, err = Respond(cr, addrB, addrA, msg, t0)
	if err != nil {
		t.Fatal(err)
	}
	return ini, res, reply
}

// openResponse returns the payloads of a response sealed for ini.
func openResponse(t *testing.T, ini *SA, raw []byte) []message.Payload {
	t.Helper()
	m, err := message.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := ini.decrypt(m, raw)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}
