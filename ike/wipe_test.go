package ike

import (
	"bytes"
	"errors"
	"testing"

	"github.com/ipsecd/ipsecd/ike/keys"
	"github.com/ipsecd/ipsecd/ike/message"
)

// held is what an SA holds of its keys: the seven IKE SA keys, which
// the test keeps to look at after the SA ended, and its SK ciphers,
// whose copies (SK_a with CBC, the salt) keys.SKCipher.Clear zeroes
// (keys' own test sees the bytes; here a cleared cipher refuses to
// seal). The AEADs' and AES's key schedules live in crypto objects that
// cannot be zeroed: Clear drops them.
type held struct {
	keys    map[string][]byte
	ciphers map[string]*keys.SKCipher
}

func heldKeys(t *testing.T, s *SA) held {
	t.Helper()
	k := s.keys
	h := held{keys: map[string][]byte{"SK_d": k.D, "SK_ai": k.AI, "SK_ar": k.AR, "SK_ei": k.EI, "SK_er": k.ER, "SK_pi": k.PI, "SK_pr": k.PR},
		ciphers: map[string]*keys.SKCipher{"seal": s.seal, "open": s.open}}
	for name, b := range h.keys {
		if nonZero(b) == 0 {
			t.Fatalf("%s is zero before the end: nothing to see wiped", name)
		}
	}
	return h
}

// checkWiped fails for every held key with a non-zero byte and every
// cipher that still seals.
func checkWiped(t *testing.T, h held) {
	t.Helper()
	for name, b := range h.keys {
		if nonZero(b) != 0 {
			t.Errorf("%s not wiped: %d of %d bytes non-zero", name, nonZero(b), len(b))
		}
	}
	for name, c := range h.ciphers {
		if _, err := c.Seal(message.HeaderFields{}, message.NoNext, nil); err == nil {
			t.Errorf("the %s SK cipher still seals: not cleared", name)
		}
	}
}

func nonZero(b []byte) int {
	n := 0
	for _, c := range b {
		if c != 0 {
			n++
		}
	}
	return n
}

// TestEndedSAKeysWiped: whatever ends an IKE SA (a wrong PSK on either
// side, a peer that does not answer, a refused proposal, a half-open SA
// that expires, a delete), the keys it held are zero afterwards,
// including the SK ciphers' copies and a MODP private exponent.
func TestEndedSAKeysWiped(t *testing.T) {
	const ikeCBC = "aes256-sha256-x25519" // CBC: the SK ciphers copy SK_a
	t.Run("wrong PSK", func(t *testing.T) {
		ci, cr := pairConfigs(t, []string{ikeCBC}, []string{"aes128gcm16"})
		cr.PSK = []byte("another")
		ini, req, _ := Initiate(ci, addrA, addrB, t0)
		res, resp, _ := Respond(cr, addrB, addrA, req, t0)
		auth, err := ini.Handle(resp, t0)
		if err != nil {
			t.Fatal(err)
		}
		heldI, heldR := heldKeys(t, ini), heldKeys(t, res)
		refusal, err := res.Handle(auth, t0)
		if !errors.Is(err, ErrAuthFailed) || res.State() != StateFailed || refusal == nil {
			t.Fatalf("responder: %v, %v; want it failed with an answer", err, res.State())
		}
		checkWiped(t, heldR)
		if _, err := ini.Handle(refusal, t0); !errors.Is(err, ErrAuthFailed) || ini.State() != StateFailed {
			t.Fatalf("initiator: %v, %v; want it failed", err, ini.State())
		}
		checkWiped(t, heldI)
		// The refusal is still given to a repeat of the request.
		if again, err := res.Handle(auth, t0); err != nil || !bytes.Equal(again, refusal) {
			t.Fatalf("repeated IKE_AUTH after the failure: %v", err)
		}
	})
	t.Run("peer does not answer", func(t *testing.T) {
		ci, cr := pairConfigs(t, []string{ikeCBC}, []string{"aes128gcm16"})
		ini, req, _ := Initiate(ci, addrA, addrB, t0)
		_, resp, _ := Respond(cr, addrB, addrA, req, t0)
		if _, err := ini.Handle(resp, t0); err != nil {
			t.Fatal(err)
		}
		held := heldKeys(t, ini)
		for i := 0; i < 20 && ini.State() != StateFailed; i++ {
			ini.Tick(ini.NextTimeout())
		}
		if !errors.Is(ini.Err(), ErrTimeout) {
			t.Fatalf("initiator %v (%v), want timed out", ini.State(), ini.Err())
		}
		checkWiped(t, held)
	})
	t.Run("refused proposal", func(t *testing.T) {
		ci, cr := pairConfigs(t, []string{"aes128-sha256-modp2048"}, []string{"aes128gcm16"})
		cr.Proposals = mustProposals(t, message.ProtoIKE, "aes128gcm16-prfsha256-ecp384")
		ini, req, _ := Initiate(ci, addrA, addrB, t0)
		priv := ini.hs.priv
		m, _ := message.Parse(req)
		peerKE := message.KE(m.Get(message.TypeKE)).Data() // any valid public value
		if _, err := priv.Shared(peerKE); err != nil {
			t.Fatal(err)
		}
		_, refusal, _ := Respond(cr, addrB, addrA, req, t0)
		if _, err := ini.Handle(refusal, t0); !errors.Is(err, ErrNoProposalChosen) {
			t.Fatalf("got %v, want no proposal chosen", err)
		}
		// dh's own test sees the exponent's words zeroed.
		if _, err := priv.Shared(peerKE); err == nil {
			t.Fatal("the MODP private key still computes shared secrets: not cleared")
		}
	})
	t.Run("half-open expiry", func(t *testing.T) {
		ci, cr := pairConfigs(t, []string{ikeCBC}, []string{"aes128gcm16"})
		_, req, _ := Initiate(ci, addrA, addrB, t0)
		res, _, _ := Respond(cr, addrB, addrA, req, t0)
		held := heldKeys(t, res)
		if _, err := res.Tick(t0.Add(HalfOpenTimeout)); !errors.Is(err, ErrTimeout) {
			t.Fatalf("got %v, want the half-open SA to expire", err)
		}
		checkWiped(t, held)
	})
	t.Run("deleted", func(t *testing.T) {
		ci, cr := pairConfigs(t, []string{ikeCBC}, []string{"aes128gcm16"})
		ini, res := establishedSides(t, ci, cr, false)
		heldI, heldR := heldKeys(t, ini), heldKeys(t, res)
		del, err := ini.Delete(t0)
		if err != nil {
			t.Fatal(err)
		}
		ack, err := res.Handle(del, t0)
		if err != nil || res.State() != StateDeleted {
			t.Fatalf("delete: %v, %v", err, res.State())
		}
		checkWiped(t, heldR)
		if _, err := ini.Handle(ack, t0); err != nil {
			t.Fatal(err)
		}
		checkWiped(t, heldI)
	})
}
