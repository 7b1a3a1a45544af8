package ike

import (
	"bytes"
	"errors"
	"testing"

	"github.com/ipsecd/ipsecd/ike/message"
)

// exchange passes req from a to b and b's answer back to a, and returns
// what a sends next (a follow-up request, or nil).
func exchange(t *testing.T, a, b *SA, req []byte) []byte {
	t.Helper()
	resp, err := b.Handle(req, t0)
	if err != nil || resp == nil {
		t.Fatalf("answering: %v", err)
	}
	next, err := a.Handle(resp, t0)
	if err != nil {
		t.Fatalf("handling the answer: %v", err)
	}
	return next
}

func childEvents(t *testing.T, s *SA) (up, down []*Child) {
	for _, e := range s.TakeEvents() {
		switch e.Kind {
		case EventChildUp:
			up = append(up, e.Child)
		case EventChildDown:
			down = append(down, e.Child)
		}
	}
	return
}

// TestRekeyChild rekeys the child from either side, with and without
// PFS: both sides end with one new child whose keys agree and differ from
// the old ones, and the old pair is reported down on both.
func TestRekeyChild(t *testing.T) {
	for _, tt := range []struct {
		name     string
		esp      string
		fromResp bool
		// ours and theirs, when set, are the ESP proposals of the side
		// that rekeys and of its peer, instead of esp for both.
		ours, theirs []string
		wantPFS      bool
	}{
		{name: "initiator, no PFS", esp: "aes128gcm16"},
		{name: "responder, no PFS", esp: "aes256-sha256", fromResp: true},
		{name: "initiator, PFS x25519", esp: "aes128gcm16-x25519", wantPFS: true},
		{name: "responder, PFS modp2048", esp: "chacha20poly1305-modp2048", fromResp: true, wantPFS: true},
		// Offered PFS or none, the peer takes none and sends no KE.
		{name: "PFS offered, none chosen", ours: []string{"aes128gcm16-x25519", "aes128gcm16"}, theirs: []string{"aes128gcm16"}},
		{name: "PFS offered, PFS chosen", ours: []string{"aes128gcm16-x25519", "aes128gcm16"}, theirs: []string{"aes128gcm16-x25519", "aes128gcm16"}, wantPFS: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.ours == nil {
				tt.ours, tt.theirs = []string{tt.esp}, []string{tt.esp}
			}
			ci, cr := pairConfigs(t, []string{"aes256-sha256-x25519"}, tt.ours)
			cr.Child.Proposals = mustProposals(t, message.ProtoESP, tt.theirs...)
			a, b := establishedSides(t, ci, cr, tt.fromResp)
			old := a.Children()[0]
			req, err := a.RekeyChild(old, t0)
			if err != nil {
				t.Fatal(err)
			}
			if m, _ := message.Parse(req); m.Exchange != message.CreateChildSA {
				t.Fatalf("got %v, want CREATE_CHILD_SA", m.Exchange)
			}
			del := exchange(t, a, b, req)
			if del == nil {
				t.Fatal("no delete of the old child after the rekey")
			}
			if next := exchange(t, a, b, del); next != nil {
				t.Fatal("unexpected request after the delete")
			}
			for _, s := range []*SA{a, b} {
				up, down := childEvents(t, s)
				if len(up) != 1 || len(down) != 1 || up[0].Replaces == nil || down[0] != up[0].Replaces {
					t.Fatalf("events: %d up, %d down; want the new child replacing the old one", len(up), len(down))
				}
				if len(s.Children()) != 1 || s.Children()[0] != up[0] {
					t.Fatalf("%d children after the rekey, want the new one", len(s.Children()))
				}
			}
			na, nb := a.Children()[0], b.Children()[0]
			if na.OutSPI != nb.InSPI || na.InSPI != nb.OutSPI || !bytes.Equal(na.Out.Enc, nb.In.Enc) || !bytes.Equal(na.In.Enc, nb.Out.Enc) || !bytes.Equal(na.Out.Integ, nb.In.Integ) {
				t.Fatal("the sides disagree on the new child")
			}
			if bytes.Equal(na.Out.Enc, old.Out.Enc) || na.InSPI == old.InSPI {
				t.Fatal("the new child has the old key or SPI")
			}
			if pfs := na.Suite.DH.Name != ""; pfs != tt.wantPFS || nb.Suite.DH != na.Suite.DH {
				t.Fatalf("PFS groups %q and %q, want PFS %t", na.Suite.DH.Name, nb.Suite.DH.Name, tt.wantPFS)
			}
		})
	}
}

// TestRekeyIKE rekeys the IKE SA from either side: the new SAs agree on
// keys different from the old ones, carry the child, and work (a liveness
// check over them), and the old ones are deleted.
func TestRekeyIKE(t *testing.T) {
	for _, fromResp := range []bool{false, true} {
		t.Run(map[bool]string{false: "initiator", true: "responder"}[fromResp], func(t *testing.T) {
			ci, cr := pairConfigs(t, []string{"aes128gcm16-prfsha256-ecp256", "aes256-sha384-x25519"}, []string{"aes128gcm16"})
			a, b := establishedSides(t, ci, cr, fromResp)
			child := a.Children()[0]
			req, err := a.RekeyIKE(t0)
			if err != nil {
				t.Fatal(err)
			}
			del := exchange(t, a, b, req)
			newA, newB := rekeyed(t, a), rekeyed(t, b)
			if del == nil || a.State() != StateDeleted {
				t.Fatalf("old SA %v, delete %v; want deleted and a delete sent", a.State(), del != nil)
			}
			if _, err := b.Handle(del, t0); err != nil || b.State() != StateDeleted {
				t.Fatalf("peer's old SA: %v, %v", b.State(), err)
			}
			ai, ar := newA.SPIs()
			bi, br := newB.SPIs()
			oi, or := a.SPIs()
			if ai != bi || ar != br || ai == oi || ar == or || !newA.IsInitiator() || newB.IsInitiator() {
				t.Fatalf("new SPIs %x/%x and %x/%x (old %x/%x); rekey initiator is initiator: %v", ai, ar, bi, br, oi, or, newA.IsInitiator())
			}
			if !bytes.Equal(newA.Keys().D, newB.Keys().D) || bytes.Equal(newA.Keys().EI, a.Keys().EI) {
				t.Fatal("new IKE keys disagree or are the old ones")
			}
			if len(newA.Children()) != 1 || newA.Children()[0] != child || len(newB.Children()) != 1 {
				t.Fatal("the child did not move to the new IKE SA")
			}
			ping, err := newA.Ping(t0)
			if err != nil {
				t.Fatal(err)
			}
			exchange(t, newA, newB, ping)
			// A second rekey of the new SA, from the other side.
			req, err = newB.RekeyIKE(t0)
			if err != nil {
				t.Fatal(err)
			}
			if exchange(t, newB, newA, req) == nil {
				t.Fatal("no delete after the second rekey")
			}
		})
	}
}

func rekeyed(t *testing.T, s *SA) *SA {
	t.Helper()
	for _, e := range s.TakeEvents() {
		if e.Kind == EventIKERekeyed {
			return e.SA
		}
		if e.Kind == EventChildDown {
			t.Fatal("an IKE rekey took a child down")
		}
	}
	t.Fatal("no EventIKERekeyed")
	return nil
}

// TestRekeyInvalidKE: the responder wants another PFS group; the
// initiator retries in it.
func TestRekeyInvalidKE(t *testing.T) {
	ci, cr := pairConfigs(t, []string{"aes256-sha256-x25519"}, []string{"aes128gcm16-x25519-ecp256"})
	cr.Child.Proposals = mustProposals(t, message.ProtoESP, "aes128gcm16-ecp256")
	ini, res, errI, errR := run(t, ci, cr)
	if errI != nil || errR != nil {
		t.Fatal(errI, errR)
	}
	req, _ := ini.RekeyChild(ini.Children()[0], t0)
	refusal, err := res.Handle(req, t0)
	if refusal == nil || !errors.Is(err, ErrInvalidKE) {
		t.Fatalf("got %v, want an INVALID_KE_PAYLOAD answer", err)
	}
	retry, err := ini.Handle(refusal, t0)
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := message.Parse(retry); m.Exchange != message.CreateChildSA {
		t.Fatalf("after INVALID_KE_PAYLOAD got %v, want a new CREATE_CHILD_SA", m.Exchange)
	}
	if exchange(t, ini, res, retry) == nil {
		t.Fatal("no delete after the retried rekey")
	}
	if g := ini.Children()[len(ini.Children())-1].Suite.DH.Name; g != "ecp256" {
		t.Fatalf("PFS group %q, want ecp256", g)
	}
}

// TestRekeyCollision: both sides rekey the child at once (RFC 7296
// §2.8.1). Both exchanges complete; the child made with the lowest nonce
// and the old one are deleted, and both sides end with the same single
// child. Nonces are random, so the rounds see both outcomes.
func TestRekeyCollision(t *testing.T) {
	survivors := map[string]int{}
	for round := 0; round < 16; round++ {
		ci, cr := pairConfigs(t, []string{"aes256-sha256-x25519"}, []string{"aes128gcm16-x25519"})
		ini, res, errI, errR := run(t, ci, cr)
		if errI != nil || errR != nil {
			t.Fatal(errI, errR)
		}
		old := ini.Children()[0]
		reqA, _ := ini.RekeyChild(ini.Children()[0], t0)
		reqB, _ := res.RekeyChild(res.Children()[0], t0)
		respA, err := res.Handle(reqA, t0)
		if err != nil {
			t.Fatal(err)
		}
		respB, err := ini.Handle(reqB, t0)
		if err != nil {
			t.Fatal(err)
		}
		delA, err := ini.Handle(respA, t0)
		if err != nil {
			t.Fatal(err)
		}
		delB, err := res.Handle(respB, t0)
		if err != nil {
			t.Fatal(err)
		}
		if delA == nil || delB == nil {
			t.Fatal("a side sent no delete after the collision")
		}
		exchange(t, ini, res, delA)
		exchange(t, res, ini, delB)
		ci1, cr1 := ini.Children(), res.Children()
		if len(ci1) != 1 || len(cr1) != 1 {
			t.Fatalf("round %d: %d and %d children after the collision, want 1 each", round, len(ci1), len(cr1))
		}
		a, b := ci1[0], cr1[0]
		if a.OutSPI != b.InSPI || a.InSPI != b.OutSPI || !bytes.Equal(a.Out.Enc, b.In.Enc) || a.InSPI == old.InSPI {
			t.Fatalf("round %d: the sides kept different children", round)
		}
		if a.Replaces != old {
			t.Fatalf("round %d: the survivor does not replace the old child", round)
		}
		// Which side made the survivor: the initiator of the exchange
		// has its keys first in KEYMAT.
		if bytes.Equal(a.Out.Enc, a.InitiatorKeys.Enc) {
			survivors["initiator's"]++
		} else {
			survivors["responder's"]++
		}
	}
	if len(survivors) != 2 {
		t.Fatalf("survivors %v: want both sides' rekeys to win sometimes", survivors)
	}
}

// side is one peer's IKE SAs in a test: messages go to the one their SPIs
// name, as the daemon routes them.
type side struct{ sas []*SA }

func (d *side) collect() {
	for _, sa := range d.sas {
		for _, e := range sa.TakeEvents() {
			if e.Kind == EventIKERekeyed || e.Kind == EventIKEDeleting {
				d.sas = append(d.sas, e.SA)
			}
		}
	}
}

func (d *side) handle(t *testing.T, msg []byte) []byte {
	t.Helper()
	h := message.Header(msg)
	for _, sa := range d.sas {
		if i, r := sa.SPIs(); i == h.ISPI() && r == h.RSPI() {
			out, err := sa.Handle(msg, t0)
			if err != nil {
				t.Fatalf("%v", err)
			}
			d.collect()
			return out
		}
	}
	t.Fatalf("no SA for %016x_i %016x_r", h.ISPI(), h.RSPI())
	return nil
}

func (d *side) live() []*SA {
	var l []*SA
	for _, sa := range d.sas {
		if sa.State() == StateEstablished {
			l = append(l, sa)
		}
	}
	return l
}

// collideIKERekeys sets up an IKE SA and its child and has both sides
// rekey the IKE SA at once (RFC 7296 §2.8.2), each taking the other's
// request and its own answer: it returns the two sides and what each
// sent after the answer to its rekey (the delete of the SA it ends).
func collideIKERekeys(t *testing.T) (a, b *side, delA, delB []byte) {
	t.Helper()
	ci, cr := pairConfigs(t, []string{"aes256-sha256-x25519"}, []string{"aes128gcm16"})
	ini, res, errI, errR := run(t, ci, cr)
	if errI != nil || errR != nil {
		t.Fatal(errI, errR)
	}
	ini.TakeEvents()
	res.TakeEvents()
	a, b = &side{sas: []*SA{ini}}, &side{sas: []*SA{res}}
	reqA, _ := ini.RekeyIKE(t0)
	reqB, _ := res.RekeyIKE(t0)
	respA := b.handle(t, reqA)
	respB := a.handle(t, reqB)
	return a, b, a.handle(t, respA), b.handle(t, respB)
}

// TestRekeyIKECollision: both sides rekey the IKE SA at once (RFC 7296
// §2.8.2). The new SA made with the lowest nonce is deleted by its maker,
// the old one by the maker of the survivor; both sides end with the same
// single IKE SA, which carries the child. Over random nonces both sides'
// rekeys win sometimes.
func TestRekeyIKECollision(t *testing.T) {
	wins := map[bool]int{}
	for round := 0; round < 16; round++ {
		a, b, delA, delB := collideIKERekeys(t)
		if delA == nil || delB == nil {
			t.Fatal("a side sent no delete after the collision")
		}
		// The answers to the deletes reach SAs that are gone already
		// (or that the daemon never learnt of): they change nothing.
		b.handle(t, delA)
		a.handle(t, delB)
		la, lb := a.live(), b.live()
		if len(la) != 1 || len(lb) != 1 {
			t.Fatalf("round %d: %d and %d live IKE SAs, want 1 each", round, len(la), len(lb))
		}
		ai, ar := la[0].SPIs()
		bi, br := lb[0].SPIs()
		if ai != bi || ar != br || !bytes.Equal(la[0].Keys().D, lb[0].Keys().D) {
			t.Fatalf("round %d: the sides kept different IKE SAs", round)
		}
		if len(la[0].Children()) != 1 || len(lb[0].Children()) != 1 {
			t.Fatalf("round %d: the survivor has %d and %d children", round, len(la[0].Children()), len(lb[0].Children()))
		}
		ping, err := la[0].Ping(t0)
		if err != nil {
			t.Fatal(err)
		}
		a.handle(t, b.handle(t, ping))
		wins[la[0].IsInitiator()]++
	}
	if len(wins) != 2 {
		t.Fatalf("survivors by side %v: want both sides' rekeys to win sometimes", wins)
	}
}
