package ike

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/ipsecd/ipsecd/ike/message"
)

// converse passes req from a to b, and every message after it between
// the two, fragments and all, until neither has anything to send (at
// most 20 messages), and returns the exchange types of a's requests in
// order.
func converse(t *testing.T, a, b *SA, req []byte) []message.ExchangeType {
	t.Helper()
	var sent []message.ExchangeType
	from, to, msg := a, b, req
	for n := 0; msg != nil && n < 20; n++ {
		if m, err := message.Parse(msg); err == nil && !m.IsResponse() {
			sent = append(sent, m.Exchange)
		}
		var out []byte
		for _, p := range from.Packets(msg) {
			o, err := to.Handle(p, t0)
			if err != nil {
				t.Fatalf("%v", err)
			}
			if o != nil {
				out = o
			}
		}
		from, to, msg = to, from, out
	}
	return sent
}

// TestFollowupKE rekeys and creates children with additional key
// exchanges (RFC 9370 §2.2.4) from either side: the CREATE_CHILD_SA, one
// IKE_FOLLOWUP_KE per additional exchange, then (after a rekey) the
// delete of the old pair; both sides end with one new child whose keys
// agree, of the suite with the additional exchanges.
func TestFollowupKE(t *testing.T) {
	for _, tt := range []struct {
		name      string
		esp       string
		fromResp  bool
		suite     string
		followups int
	}{
		{"initiator, x25519+mlkem768", "aes256gcm16-x25519-ke1_mlkem768", false, "aes256gcm16-x25519-ke1_mlkem768-noesn", 1},
		{"responder, x25519+mlkem768", "aes256gcm16-x25519-ke1_mlkem768", true, "aes256gcm16-x25519-ke1_mlkem768-noesn", 1},
		{"initiator, two", "aes128-sha256-ecp256-ke1_mlkem768-ke2_mlkem1024", false, "aes128-sha256-ecp256-ke1_mlkem768-ke2_mlkem1024-noesn", 2},
		{"responder, mlkem768 alone", "aes256gcm16-mlkem768", true, "aes256gcm16-mlkem768-noesn", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ci, cr := pairConfigs(t, []string{"aes256-sha384-x25519-ke1_mlkem768"}, []string{tt.esp})
			a, b := establishedSides(t, ci, cr, tt.fromResp)
			old := a.Children()[0]
			req, err := a.RekeyChild(old, t0)
			if err != nil {
				t.Fatal(err)
			}
			sent := converse(t, a, b, req)
			want := []message.ExchangeType{message.CreateChildSA}
			for range tt.followups {
				want = append(want, message.IKEFollowupKE)
			}
			want = append(want, message.Informational)
			if !slices.Equal(sent, want) {
				t.Fatalf("requests %v, want %v", sent, want)
			}
			na, nb := a.Children()[0], b.Children()[0]
			if len(a.Children()) != 1 || len(b.Children()) != 1 || na.Replaces != old {
				t.Fatalf("children %d and %d after the rekey", len(a.Children()), len(b.Children()))
			}
			if na.OutSPI != nb.InSPI || !bytes.Equal(na.Out.Enc, nb.In.Enc) || !bytes.Equal(na.In.Enc, nb.Out.Enc) || !bytes.Equal(na.Out.Integ, nb.In.Integ) {
				t.Fatal("the sides disagree on the new child")
			}
			if na.Suite.String() != tt.suite || nb.Suite.String() != tt.suite {
				t.Fatalf("suites %q and %q, want %q", na.Suite, nb.Suite, tt.suite)
			}
			// A further child of the connection, the same way.
			req, err = a.CreateChild("", t0)
			if err != nil {
				t.Fatal(err)
			}
			if sent := converse(t, a, b, req); len(sent) != 1+tt.followups {
				t.Fatalf("creating a child: requests %v", sent)
			}
			if len(a.Children()) != 2 || len(b.Children()) != 2 || !bytes.Equal(a.Children()[1].Out.Enc, b.Children()[1].In.Enc) {
				t.Fatal("no agreed second child")
			}
			if a.followup != nil || b.followup != nil || a.active != nil {
				t.Error("state of IKE_FOLLOWUP_KE left behind")
			}
		})
	}
}

// TestFollowupKERefused: an IKE_FOLLOWUP_KE whose link the responder did
// not give gets STATE_NOT_FOUND, and one whose KE is of another method
// INVALID_SYNTAX; the rekey fails on the initiator's side, the old child
// stays on both.
func TestFollowupKERefused(t *testing.T) {
	for _, tt := range []struct {
		name   string
		forge  func(x *followupKE)
		notify message.NotifyType
	}{
		{"unknown link", func(x *followupKE) { x.link = []byte("not-ours") }, message.StateNotFound},
		{"KE of another method", func(x *followupKE) { x.methods[0].ID = 37 }, message.InvalidSyntax},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ci, cr := pairConfigs(t, []string{"aes256-sha384-x25519"}, []string{"aes256gcm16-x25519-ke1_mlkem768"})
			a, b := establishedSides(t, ci, cr, false)
			old := a.Children()[0]
			req, _ := a.RekeyChild(old, t0)
			var answer []byte
			for _, p := range a.Packets(req) {
				answer, _ = b.Handle(p, t0)
			}
			// The IKE_FOLLOWUP_KE request, forged before it is sent.
			var followup []byte
			for _, p := range b.Packets(answer) {
				if o, _ := a.Handle(p, t0); o != nil {
					followup = o
				}
			}
			f, ok := a.active.(*followupKE)
			if !ok || followup == nil {
				t.Fatalf("no IKE_FOLLOWUP_KE under way (%T)", a.active)
			}
			tt.forge(f)
			a.pending, a.active = nil, nil
			a.nextID--
			forged, err := a.start(f, t0)
			if err != nil {
				t.Fatal(err)
			}
			var reply []byte
			for _, p := range a.Packets(forged) {
				reply, _ = b.Handle(p, t0)
			}
			rm, _ := message.Parse(reply)
			ps, err := a.decrypt(rm, reply)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := notifyOf(ps, tt.notify); !ok {
				t.Fatalf("answer %v, want notify %d", ps, tt.notify)
			}
			if _, err := a.Handle(reply, t0); !errors.Is(err, ErrChildFailed) {
				t.Fatalf("initiator: %v, want ErrChildFailed", err)
			}
			if len(a.Children()) != 1 || a.Children()[0] != old || len(b.Children()) != 1 || b.followup != nil {
				t.Fatalf("children %d and %d, responder's followup %v", len(a.Children()), len(b.Children()), b.followup)
			}
		})
	}
}

// TestFollowupKEIKERekey rekeys an IKE SA of x25519 + ML-KEM-768 from
// either side: CREATE_CHILD_SA, one IKE_FOLLOWUP_KE, the delete of the
// old SA; the new SAs agree on keys of the same exchanges and carry the
// child.
func TestFollowupKEIKERekey(t *testing.T) {
	for _, fromResp := range []bool{false, true} {
		ci, cr := pairConfigs(t, []string{"aes256-sha384-x25519-ke1_mlkem768"}, []string{"aes256gcm16"})
		a, b := establishedSides(t, ci, cr, fromResp)
		req, err := a.RekeyIKE(t0)
		if err != nil {
			t.Fatal(err)
		}
		sent := converse(t, a, b, req)
		if want := []message.ExchangeType{message.CreateChildSA, message.IKEFollowupKE, message.Informational}; !slices.Equal(sent, want) {
			t.Fatalf("requests %v, want %v", sent, want)
		}
		na, nb := rekeyed(t, a), rekeyed(t, b)
		if !bytes.Equal(na.Keys().D, nb.Keys().D) || bytes.Equal(na.Keys().D, a.Keys().D) {
			t.Fatal("the new IKE SAs disagree, or kept the old SK_d")
		}
		if na.Suite().String() != "aes256-sha384-prfsha384-x25519-ke1_mlkem768" || len(na.Children()) != 1 || len(nb.Children()) != 1 {
			t.Fatalf("new SA: suite %q, children %d and %d", na.Suite(), len(na.Children()), len(nb.Children()))
		}
	}
}

// TestFollowupKECollision: both sides rekey the child at once, each with
// an additional exchange; the CREATE_CHILD_SAs cross, then the
// IKE_FOLLOWUP_KEs. As without them (§2.8.1), the child made with the
// lowest nonce is deleted by its maker and the other replaces the old
// one on both sides.
func TestFollowupKECollision(t *testing.T) {
	for round := 0; round < 8; round++ {
		ci, cr := pairConfigs(t, []string{"aes256-sha384-x25519"}, []string{"aes256gcm16-x25519-ke1_mlkem768"})
		ini, res, errI, errR := run(t, ci, cr)
		if errI != nil || errR != nil {
			t.Fatal(errI, errR)
		}
		old := ini.Children()[0]
		pass := func(from, to *SA, msg []byte) []byte {
			t.Helper()
			var out []byte
			for _, p := range from.Packets(msg) {
				o, err := to.Handle(p, t0)
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				if o != nil {
					out = o
				}
			}
			return out
		}
		reqA, _ := ini.RekeyChild(ini.Children()[0], t0)
		reqB, _ := res.RekeyChild(res.Children()[0], t0)
		respA, respB := pass(ini, res, reqA), pass(res, ini, reqB)
		fA, fB := pass(res, ini, respA), pass(ini, res, respB) // the IKE_FOLLOWUP_KE requests
		ansA, ansB := pass(ini, res, fA), pass(res, ini, fB)
		delA, delB := pass(res, ini, ansA), pass(ini, res, ansB)
		if delA == nil || delB == nil {
			t.Fatalf("round %d: a side sent no delete after the collision", round)
		}
		if pass(res, ini, pass(ini, res, delA)) != nil || pass(ini, res, pass(res, ini, delB)) != nil {
			t.Fatalf("round %d: a request after the deletes", round)
		}
		ci1, cr1 := ini.Children(), res.Children()
		if len(ci1) != 1 || len(cr1) != 1 {
			t.Fatalf("round %d: %d and %d children after the collision, want 1 each", round, len(ci1), len(cr1))
		}
		if a, b := ci1[0], cr1[0]; a.OutSPI != b.InSPI || !bytes.Equal(a.Out.Enc, b.In.Enc) || a.Replaces != old {
			t.Fatalf("round %d: the sides kept different children", round)
		}
	}
}

// FuzzFollowupKE sends authenticated IKE_FOLLOWUP_KE messages of
// arbitrary payloads: as the request to a responder that answered a
// child rekey with N(ADDITIONAL_KEY_EXCHANGE), and as the response to
// the initiator whose IKE_FOLLOWUP_KE waits for it. Each side answers or
// fails the exchange; none panics, and the old child stays until a
// rekey completes.
func FuzzFollowupKE(f *testing.F) {
	ci, cr := pairConfigs(f, []string{"aes256-sha384-x25519"}, []string{"aes256gcm16-x25519-ke1_mlkem768"})
	ke, _ := message.AppendPayloads(nil, []message.Payload{
		{Type: message.TypeKE, Body: message.AppendKE(nil, 36, make([]byte, 1184))},
		notify(message.AdditionalKeyExchange, make([]byte, 8)),
	})
	f.Add(false, uint8(message.TypeKE), ke)
	f.Add(true, uint8(message.TypeKE), ke[:64])
	f.Add(true, uint8(message.TypeN), []byte{0, 0, 0, 8, 0, 0, 0, 47})
	f.Fuzz(func(t *testing.T, response bool, first uint8, chain []byte) {
		ini, res, errI, errR := run(t, ci, cr)
		if errI != nil || errR != nil {
			t.Fatal(errI, errR)
		}
		req, _ := ini.RekeyChild(ini.Children()[0], t0)
		var answer []byte
		for _, p := range ini.Packets(req) {
			answer, _ = res.Handle(p, t0)
		}
		for _, p := range res.Packets(answer) {
			ini.Handle(p, t0) // ini's IKE_FOLLOWUP_KE is outstanding now
		}
		if response {
			h := res.header(message.IKEFollowupKE, ini.nextID-1, true)
			if m, err := res.seal.Seal(h, message.PayloadType(first), chain); err == nil {
				ini.Handle(m, t0)
			}
		} else {
			h := ini.header(message.IKEFollowupKE, ini.nextID-1, false)
			if m, err := ini.seal.Seal(h, message.PayloadType(first), chain); err == nil {
				res.Handle(m, t0)
			}
		}
		if len(ini.Children()) == 0 || len(res.Children()) == 0 {
			t.Fatal("a child went without a rekey completing")
		}
	})
}

// TestFollowupKEIKECollision: both sides rekey an IKE SA of x25519 +
// ML-KEM-768 at once (RFC 7296 §2.8.2 with RFC 9370's IKE_FOLLOWUP_KE):
// the CREATE_CHILD_SAs cross, then the IKE_FOLLOWUP_KEs; as without
// additional exchanges, both sides end with the same single IKE SA,
// which carries the child and answers a liveness check.
func TestFollowupKEIKECollision(t *testing.T) {
	for round := 0; round < 8; round++ {
		ci, cr := pairConfigs(t, []string{"aes256-sha384-x25519-ke1_mlkem768"}, []string{"aes256gcm16"})
		ini, res, errI, errR := run(t, ci, cr)
		if errI != nil || errR != nil {
			t.Fatal(errI, errR)
		}
		ini.TakeEvents()
		res.TakeEvents()
		a, b := &side{sas: []*SA{ini}}, &side{sas: []*SA{res}}
		// pass hands msg, sent by one of from's SAs, to to in all its
		// datagrams, and returns the answer or next request.
		pass := func(from, to *side, msg []byte) []byte {
			t.Helper()
			var sender *SA
			h := message.Header(msg)
			for _, s := range from.sas {
				if i, r := s.SPIs(); i == h.ISPI() && r == h.RSPI() {
					sender = s
				}
			}
			var out []byte
			for _, p := range sender.Packets(msg) {
				if o := to.handle(t, p); o != nil {
					out = o
				}
			}
			return out
		}
		reqA, _ := ini.RekeyIKE(t0)
		reqB, _ := res.RekeyIKE(t0)
		respA, respB := pass(a, b, reqA), pass(b, a, reqB)
		fA, fB := pass(b, a, respA), pass(a, b, respB) // the IKE_FOLLOWUP_KE requests
		ansA, ansB := pass(a, b, fA), pass(b, a, fB)
		delA, delB := pass(b, a, ansA), pass(a, b, ansB)
		if delA == nil || delB == nil {
			t.Fatalf("round %d: a side sent no delete after the collision", round)
		}
		pass(a, b, delA)
		pass(b, a, delB)
		la, lb := a.live(), b.live()
		if len(la) != 1 || len(lb) != 1 {
			t.Fatalf("round %d: %d and %d live IKE SAs, want 1 each", round, len(la), len(lb))
		}
		ai, ar := la[0].SPIs()
		bi, br := lb[0].SPIs()
		if ai != bi || ar != br || !bytes.Equal(la[0].Keys().D, lb[0].Keys().D) || len(la[0].Children()) != 1 || len(lb[0].Children()) != 1 {
			t.Fatalf("round %d: the sides kept different IKE SAs, or lost the child", round)
		}
		ping, err := la[0].Ping(t0)
		if err != nil {
			t.Fatal(err)
		}
		pass(b, a, pass(a, b, ping))
	}
}
