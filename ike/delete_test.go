package ike

import (
	"bytes"
	"errors"
	"testing"
	"time"
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
