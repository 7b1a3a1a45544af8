package ike

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/ike/message"
)

// TestDeleteRetransmitted: our delete of the IKE SA is a request like
// any other (RFC 7296 §1.4.1, §2.4): unanswered, it is sent again on the
// retransmission schedule until the tries run out, and the answer stops
// it. The SA is Deleted at once all the same: its children are down
// before the first send. It was sent once, never again.
func TestDeleteRetransmitted(t *testing.T) {
	ci, cr := pairConfigs(t, []string{"aes128gcm16-prfsha256-x25519"}, []string{"aes128gcm16"})
	ini, res := establishedSides(t, ci, cr, false)
	del, err := ini.Delete(t0)
	if err != nil {
		t.Fatal(err)
	}
	if ev := ini.TakeEvents(); ini.State() != StateDeleted || len(ev) != 2 || ev[0].Kind != EventChildDown || ev[1].Kind != EventIKEDown {
		t.Fatalf("after Delete: %v, events %+v; want Deleted, ChildDown, IKEDown", ini.State(), ev)
	}
	sends := 0
	for i := 0; i < 20 && !ini.NextTimeout().IsZero(); i++ {
		out, err := ini.Tick(ini.NextTimeout())
		if out != nil {
			if !bytes.Equal(out, del) {
				t.Fatal("the retransmission differs from the delete")
			}
			sends++
		}
		if err != nil && !errors.Is(err, ErrTimeout) {
			t.Fatal(err)
		}
	}
	if want := ci.retransmit().Tries; sends != want {
		t.Fatalf("an unanswered delete was sent %d times more, want %d", sends, want)
	}
	if ev := ini.TakeEvents(); ini.State() != StateDeleted || len(ev) != 0 {
		t.Fatalf("after the last try: %v, events %+v; want still Deleted and nothing more to say", ini.State(), ev)
	}

	// The answer stops the retransmissions; a late one is dropped.
	ini, res = establishedSides(t, ci, cr, false)
	if del, err = ini.Delete(t0); err != nil {
		t.Fatal(err)
	}
	first := ini.NextTimeout()
	if out, _ := ini.Tick(first); !bytes.Equal(out, del) {
		t.Fatal("no retransmission of the delete at its first timeout")
	}
	ack, err := res.Handle(del, first)
	if err != nil || ack == nil {
		t.Fatalf("the peer's answer: %v", err)
	}
	if _, err := ini.Handle(ack, first); err != nil {
		t.Fatalf("the answer to our delete: %v", err)
	}
	if !ini.NextTimeout().IsZero() {
		t.Fatalf("still retransmitting at %v after the answer", ini.NextTimeout())
	}
	if out, _ := ini.Tick(first.Add(time.Hour)); out != nil {
		t.Fatal("retransmitted after the answer")
	}
	if _, err := ini.Handle(ack, first); !errors.Is(err, ErrDropped) {
		t.Fatalf("the answer twice: %v, want dropped", err)
	}

	// After an IKE rekey the old SA's delete is retransmitted too.
	a, b := establishedSides(t, ci, cr, false)
	req, err := a.RekeyIKE(t0)
	if err != nil {
		t.Fatal(err)
	}
	del = exchange(t, a, b, req)
	if del == nil || a.State() != StateDeleted {
		t.Fatalf("after the rekey: %v, delete %v", a.State(), del != nil)
	}
	if out, _ := a.Tick(a.NextTimeout()); !bytes.Equal(out, del) {
		t.Fatal("the old SA's delete after a rekey is not retransmitted")
	}
}

// TestCrossingDeletes: both sides delete the IKE SA at once; each
// answers the other's delete while its own waits, and each answer ends
// the other's retransmissions. A Deleted SA dropped the peer's delete,
// which then went unanswered until its tries ran out.
func TestCrossingDeletes(t *testing.T) {
	ci, cr := pairConfigs(t, []string{"aes128gcm16-prfsha256-x25519"}, []string{"aes128gcm16"})
	a, b := establishedSides(t, ci, cr, false)
	delA, err := a.Delete(t0)
	if err != nil {
		t.Fatal(err)
	}
	delB, err := b.Delete(t0)
	if err != nil {
		t.Fatal(err)
	}
	ackB, err := b.Handle(delA, t0)
	if err != nil || ackB == nil {
		t.Fatalf("B, deleting, answering A's delete: %v", err)
	}
	ackA, err := a.Handle(delB, t0)
	if err != nil || ackA == nil {
		t.Fatalf("A, deleting, answering B's delete: %v", err)
	}
	for _, x := range []struct {
		s   *SA
		ack []byte
	}{{a, ackB}, {b, ackA}} {
		if _, err := x.s.Handle(x.ack, t0); err != nil || !x.s.NextTimeout().IsZero() || x.s.State() != StateDeleted {
			t.Fatalf("the answer to our delete: %v, pending until %v, %v", err, x.s.NextTimeout(), x.s.State())
		}
		if ev := x.s.TakeEvents(); len(ev) != 2 {
			t.Fatalf("events %+v, want ChildDown and IKEDown once", ev)
		}
	}
}

// TestRekeyIKECollisionDeletesRetransmitted: after simultaneous IKE
// rekeys (§2.8.2) each side sends one delete: the old SA's, or that of
// the new SA that lost on nonces. Both are retransmitted until answered,
// from an SA the events named (EventIKERekeyed, EventIKEDeleting for
// the loser): the loser's delete came from an SA no event named, which
// could not be retransmitted.
func TestRekeyIKECollisionDeletesRetransmitted(t *testing.T) {
	for round := 0; round < 8; round++ {
		a, b, delA, delB := collideIKERekeys(t)
		for _, d := range []struct {
			from, to *side
			del      []byte
		}{{a, b, delA}, {b, a, delB}} {
			h := message.Header(d.del)
			var sender *SA
			for _, s := range d.from.sas {
				if i, r := s.SPIs(); i == h.ISPI() && r == h.RSPI() {
					sender = s
				}
			}
			if sender == nil {
				t.Fatalf("round %d: no SA the events named sent the delete of %016x_i %016x_r", round, h.ISPI(), h.RSPI())
			}
			if out, _ := sender.Tick(sender.NextTimeout()); !bytes.Equal(out, d.del) {
				t.Fatalf("round %d: the delete of %016x_i is not retransmitted", round, h.ISPI())
			}
			ack := d.to.handle(t, d.del)
			if _, err := sender.Handle(ack, t0); err != nil || !sender.NextTimeout().IsZero() {
				t.Fatalf("round %d: the answer to the delete: %v, still pending until %v", round, err, sender.NextTimeout())
			}
		}
	}
}

// FuzzHandleDeleting feeds arbitrary messages to an SA whose delete
// waits for its answer (which still takes requests and a response):
// nothing panics, it stays Deleted, and garbage neither ends its
// retransmissions nor draws an answer.
func FuzzHandleDeleting(f *testing.F) {
	ci, cr := pairConfigs(f, []string{"aes128gcm16-prfsha256-x25519"}, []string{"aes128gcm16"})
	ini, req, _ := Initiate(ci, addrA, addrB, t0)
	res, resp, _ := Respond(cr, addrB, addrA, req, t0)
	auth, _ := ini.Handle(resp, t0)
	authResp, _ := res.Handle(auth, t0)
	ini.Handle(authResp, t0)
	del, _ := ini.Delete(t0)
	ping, _ := res.Ping(t0)
	for _, s := range [][]byte{del, ping, authResp, resp} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out, _ := ini.Handle(b, t0)
		if ini.State() != StateDeleted || ini.NextTimeout().IsZero() {
			t.Fatalf("a fuzzed message took the deleting SA to %v, pending until %v", ini.State(), ini.NextTimeout())
		}
		if out != nil && !bytes.Equal(b, ping) {
			t.Fatalf("a fuzzed message drew an answer: %x", out)
		}
	})
}
