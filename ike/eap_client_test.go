package ike

import (
	"errors"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/ike/eap"
	"github.com/ipsecd/ipsecd/ike/message"
)

// eapClientConfigs are a road warrior a.test of local auth auth (EAP
// identity alice, password pw) and our gateway b.test of a certificate
// that knows alice's password "alice-pw".
func eapClientConfigs(t testing.TB, auth AuthClass, pw string) (ci, cr *Config) {
	t.Helper()
	ci, cr, _ = certPairConfigs(t, "p256")
	ci.LocalAuth, ci.LocalCerts, ci.PrivateKey = auth, nil, nil
	ci.LocalEAPID = "alice"
	ci.EAPSecret = func(id string) ([]byte, bool) { return []byte(pw), id == "alice" }
	cr.RemoteAuth = auth
	cr.EAPSecret = func(id string) ([]byte, bool) { return []byte("alice-pw"), id == "alice" }
	mustValidate(t, ci, cr)
	return ci, cr
}

// TestEAPClient: our road warrior authenticates to our gateway with
// EAP-MSCHAPv2 and EAP-MD5: no AUTH in its first request, the gateway's
// certificate checked, the EAP rounds, then AUTHs keyed by the MSK (by
// SK_p for MD5) verified on both sides and the child up with the same
// keys.
func TestEAPClient(t *testing.T) {
	for _, auth := range []AuthClass{AuthEAPMSCHAPv2, AuthEAPMD5} {
		t.Run(string(auth), func(t *testing.T) {
			ci, cr := eapClientConfigs(t, auth, "alice-pw")
			ini, res, errI, errR := run(t, ci, cr)
			if errI != nil || errR != nil {
				t.Fatal(errI, errR)
			}
			checkPair(t, ini, res)
			if res.EAPIdentity() != "alice" || ini.PeerAuth() != AuthPubkey || ini.PeerID().String() != "b.test" {
				t.Errorf("gateway saw EAP identity %q; client saw %s by %s", res.EAPIdentity(), ini.PeerID(), ini.PeerAuth())
			}
			if ini.hs != nil || res.hs != nil {
				t.Error("the handshake state outlived the establishment")
			}
		})
	}
}

// TestEAPClientWrongPassword: a wrong password fails both sides with
// ErrAuthFailed naming the identity and method, never the password.
func TestEAPClientWrongPassword(t *testing.T) {
	for _, auth := range []AuthClass{AuthEAPMSCHAPv2, AuthEAPMD5} {
		t.Run(string(auth), func(t *testing.T) {
			ci, cr := eapClientConfigs(t, auth, "not-alices-pw")
			ini, res, errI, errR := run(t, ci, cr)
			if ini.State() != StateFailed || res.State() != StateFailed {
				t.Fatalf("states %v and %v, want both failed (errors %v, %v)", ini.State(), res.State(), errI, errR)
			}
			var ae *eap.AuthError
			if err := ini.Err(); !errors.Is(err, ErrAuthFailed) || !errors.As(err, &ae) || ae.Identity != "alice" || strings.Contains(err.Error(), "not-alices") {
				t.Errorf("client's error %v, want an EAP AuthError of alice without the password", err)
			}
			if err := res.Err(); !errors.Is(err, ErrAuthFailed) || strings.Contains(err.Error(), "alice-pw") {
				t.Errorf("gateway's error %v", err)
			}
		})
	}
}

// TestEAPClientNoAUTHFirst: the first IKE_AUTH request carries no AUTH
// (RFC 7296 §2.16); a gateway that wants a PSK refuses.
func TestEAPClientNoAUTHFirst(t *testing.T) {
	ci, _ := eapClientConfigs(t, AuthEAPMSCHAPv2, "alice-pw")
	_, crPSK := pairConfigs(t, []string{"aes256-sha256-x25519"}, []string{"aes128gcm16"})
	ini, res, errI, errR := run(t, ci, crPSK)
	if ini.State() != StateFailed || !errors.Is(errI, ErrAuthFailed) || !errors.Is(errR, ErrAuthFailed) {
		t.Fatalf("client %v (%v), gateway %v (%v): want both to fail authentication", ini.State(), errI, res.State(), errR)
	}
	if !strings.Contains(errR.Error(), "no IDi or AUTH payload") {
		t.Errorf("gateway's error %v, want it to miss AUTH", errR)
	}
}

// TestEAPClientValidate: what local auth EAP needs.
func TestEAPClientValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(c *Config)
		want string
	}{
		{"remote psk", func(c *Config) { c.RemoteAuth, c.PSK = AuthPSK, []byte("k") }, "needs remote auth pubkey"},
		{"no secrets", func(c *Config) { c.EAPSecret = nil }, "needs our password"},
		{"unknown identity", func(c *Config) { c.LocalEAPID = "bob" }, `no eap secret for EAP identity "bob"`},
		{"radius", func(c *Config) { c.LocalAuth = AuthEAPRADIUS }, "eap-radius is the gateway's"},
		{"no id", func(c *Config) { c.LocalID = Identity{} }, "needs a local id"},
	} {
		ci, _ := eapClientConfigs(t, AuthEAPMSCHAPv2, "alice-pw")
		tc.mod(ci)
		if err := ci.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// FuzzEAPClient: the gateway answers our EAP client's IKE_AUTH request
// of round step (0: the first, with its certificate AUTH; then
// MSCHAPv2's challenge, its success, EAP-Success; 4: the last AUTH) with whatever authenticated payloads it
// likes. The client answers, fails or drops them without panicking, and
// is never established by them: that takes the gateway's signature and
// its AUTH keyed by the MSK.
func FuzzEAPClient(f *testing.F) {
	ci, cr := eapClientConfigs(f, AuthEAPMSCHAPv2, "alice-pw")
	eapReq, _ := message.AppendPayloads(nil, []message.Payload{{Type: message.TypeEAP, Body: message.AppendEAP(nil, message.EAPRequest, 1, message.EAPIdentity, nil)}})
	f.Add(uint8(0), uint8(message.TypeEAP), eapReq)
	f.Add(uint8(1), uint8(message.TypeEAP), eapReq)
	f.Add(uint8(2), uint8(message.TypeEAP), []byte{0, 0, 0, 8, 3, 2, 0, 4})
	f.Add(uint8(3), uint8(message.TypeAUTH), []byte{0, 0, 0, 12, 2, 0, 0, 0, 1, 2, 3, 4})
	fuzzEAPClientRounds(f, ci, cr)
}

// FuzzEAPOnlyClient is FuzzEAPClient for an EAP-TLS client that accepts
// a gateway proving itself by EAP alone (remote auth eap, eaponly.go):
// a first response without AUTH, EAP-TLS requests and fragments, and a
// forged last AUTH never establish it.
func FuzzEAPOnlyClient(f *testing.F) {
	ci, cr := eapOnlyConfigs(f, AuthEAPTLS)
	first, _ := message.AppendPayloads(nil, []message.Payload{
		{Type: message.TypeIDr, Body: ci.RemoteID.payload()},
		{Type: message.TypeEAP, Body: message.AppendEAP(nil, message.EAPRequest, 1, message.EAPIdentity, nil)},
	})
	f.Add(uint8(0), uint8(message.TypeIDr), first)
	start, _ := message.AppendPayloads(nil, []message.Payload{{Type: message.TypeEAP, Body: message.AppendEAP(nil, message.EAPRequest, 2, message.EAPTLS, []byte{0x20})}})
	f.Add(uint8(1), uint8(message.TypeEAP), start)
	frag, _ := message.AppendPayloads(nil, []message.Payload{{Type: message.TypeEAP, Body: message.AppendEAP(nil, message.EAPRequest, 3, message.EAPTLS, []byte{0xc0, 0, 0, 0, 9, 22, 3, 3})}})
	f.Add(uint8(2), uint8(message.TypeEAP), frag)
	f.Add(uint8(4), uint8(message.TypeAUTH), []byte{0, 0, 0, 12, 2, 0, 0, 0, 1, 2, 3, 4})
	fuzzEAPClientRounds(f, ci, cr)
}

// fuzzEAPClientRounds: the gateway cr answers ci's IKE_AUTH request of
// round step (0: the first; then the EAP rounds) with whatever
// authenticated payloads it likes. The client answers, fails or drops
// them without panicking, and is never established by them: that takes
// the gateway's proof (a signature, or EAP-only's method) and its AUTH
// keyed by the MSK.
func fuzzEAPClientRounds(f *testing.F, ci, cr *Config) {
	f.Fuzz(func(t *testing.T, step, first uint8, chain []byte) {
		ini, res, reply := initPair(t, ci, cr)
		req, err := ini.Handle(reply, t0)
		for range step % 5 {
			if err != nil || req == nil {
				t.Fatalf("round: %v", err)
			}
			var out []byte
			for _, p := range ini.Packets(req) {
				if r, _ := res.Handle(p, t0); r != nil {
					out = r
				}
			}
			if req, err = nil, nil; out != nil {
				for _, p := range res.Packets(out) {
					if r, e := ini.Handle(p, t0); r != nil || e != nil {
						req, err = r, e
					}
				}
			}
		}
		if ini.State() != StateAuthSent {
			t.Fatalf("after %d rounds: %v (%v)", step%5, ini.State(), err)
		}
		sealed, err := res.seal.Seal(res.header(message.IKEAuth, ini.nextID-1, true), message.PayloadType(first), chain)
		if err != nil {
			return
		}
		ini.Handle(sealed, t0)
		if ini.State() == StateEstablished {
			t.Fatalf("the client is established by a forged response at round %d", step%5)
		}
	})
}
