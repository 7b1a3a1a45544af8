package ike

import (
	"errors"
	"testing"
)

// TestHandshakeDropped: the state of IKE_SA_INIT and IKE_AUTH (DH key,
// nonces, the IKE_SA_INIT messages, CERTREQs, the half-open deadline)
// is held while the SA connects and dropped once it is established or
// has failed, on both sides; an SA a rekey made never has it.
func TestHandshakeDropped(t *testing.T) {
	const ike = "aes256-sha256-x25519"
	connecting := func(t *testing.T, name string, s *SA) {
		t.Helper()
		if s.hs == nil {
			t.Fatalf("%s: %v without its handshake state", name, s.State())
		}
	}
	dropped := func(t *testing.T, name string, s *SA) {
		t.Helper()
		if s.hs != nil {
			t.Errorf("%s: %v and still holds its handshake state", name, s.State())
		}
	}
	t.Run("established", func(t *testing.T) {
		ci, cr := pairConfigs(t, []string{ike}, []string{"aes128gcm16"})
		ini, req, _ := Initiate(ci, addrA, addrB, t0)
		connecting(t, "initiator", ini)
		res, resp, _ := Respond(cr, addrB, addrA, req, t0)
		connecting(t, "responder", res)
		auth, err := ini.Handle(resp, t0)
		if err != nil {
			t.Fatal(err)
		}
		connecting(t, "initiator", ini)
		reply, err := res.Handle(auth, t0)
		if err != nil || res.State() != StateEstablished {
			t.Fatalf("responder: %v, %v", res.State(), err)
		}
		dropped(t, "responder", res)
		if _, err := ini.Handle(reply, t0); err != nil || ini.State() != StateEstablished || len(ini.Children()) != 1 {
			t.Fatalf("initiator: %v, %v", ini.State(), err)
		}
		dropped(t, "initiator", ini)
		// The SAs live without it: a liveness check, a child rekey and
		// an IKE rekey, whose new SA never had one.
		ping, _ := ini.Ping(t0)
		exchange(t, ini, res, ping)
		ini.TakeEvents()
		res.TakeEvents()
		req, err = res.RekeyChild(res.Children()[0], t0)
		if err != nil {
			t.Fatal(err)
		}
		if del := exchange(t, res, ini, req); del != nil {
			exchange(t, res, ini, del) // the old child's
		}
		ini.TakeEvents()
		res.TakeEvents()
		req, err = ini.RekeyIKE(t0)
		if err != nil {
			t.Fatal(err)
		}
		exchange(t, ini, res, req)
		dropped(t, "new SA of the initiator", rekeyed(t, ini))
		dropped(t, "new SA of the responder", rekeyed(t, res))
	})
	t.Run("wrong PSK", func(t *testing.T) {
		ci, cr := pairConfigs(t, []string{ike}, []string{"aes128gcm16"})
		cr.PSK = []byte("another")
		ini, req, _ := Initiate(ci, addrA, addrB, t0)
		res, resp, _ := Respond(cr, addrB, addrA, req, t0)
		auth, _ := ini.Handle(resp, t0)
		refusal, err := res.Handle(auth, t0)
		if !errors.Is(err, ErrAuthFailed) {
			t.Fatalf("responder: %v, want authentication failed", err)
		}
		dropped(t, "responder", res)
		if _, err := ini.Handle(refusal, t0); !errors.Is(err, ErrAuthFailed) {
			t.Fatalf("initiator: %v, want authentication failed", err)
		}
		dropped(t, "initiator", ini)
	})
	t.Run("no answer", func(t *testing.T) {
		ci, _ := pairConfigs(t, []string{ike}, []string{"aes128gcm16"})
		ini, _, _ := Initiate(ci, addrA, addrB, t0)
		for i := 0; i < 20 && ini.State() != StateFailed; i++ {
			ini.Tick(ini.NextTimeout())
		}
		if !errors.Is(ini.Err(), ErrTimeout) {
			t.Fatalf("initiator %v (%v), want timed out", ini.State(), ini.Err())
		}
		dropped(t, "initiator", ini)
	})
	t.Run("half-open expiry", func(t *testing.T) {
		ci, cr := pairConfigs(t, []string{ike}, []string{"aes128gcm16"})
		_, req, _ := Initiate(ci, addrA, addrB, t0)
		res, _, _ := Respond(cr, addrB, addrA, req, t0)
		if got := res.NextTimeout(); !got.Equal(t0.Add(HalfOpenTimeout)) {
			t.Fatalf("half-open SA's next timeout %v, want %v", got, t0.Add(HalfOpenTimeout))
		}
		if _, err := res.Tick(t0.Add(HalfOpenTimeout - 1)); err != nil {
			t.Fatalf("before the half-open timeout: %v", err)
		}
		if _, err := res.Tick(t0.Add(HalfOpenTimeout)); !errors.Is(err, ErrTimeout) {
			t.Fatalf("got %v, want the half-open SA to expire", err)
		}
		dropped(t, "responder", res)
	})
	t.Run("wiped while half-open", func(t *testing.T) {
		ci, cr := pairConfigs(t, []string{ike}, []string{"aes128gcm16"})
		ini, req, _ := Initiate(ci, addrA, addrB, t0)
		res, _, _ := Respond(cr, addrB, addrA, req, t0)
		for _, s := range []*SA{ini, res} {
			s.Wipe()
			dropped(t, "wiped", s)
			s.NextTimeout() // no handshake left to look at: no panic
			s.Tick(t0.Add(HalfOpenTimeout))
		}
	})
}
