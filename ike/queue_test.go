package ike

import (
	"testing"

	"github.com/ipsecd/ipsecd/ike/message"
)

// drain passes a's outstanding request req to b and the answer back, and
// then each request a's queue starts (Next) or the exchange brings (a
// rekey's delete), until a is idle with nothing queued: at most n
// exchanges. It returns the exchanges of a, in order.
func drain(t *testing.T, a, b *SA, req []byte, n int) []message.ExchangeType {
	t.Helper()
	var got []message.ExchangeType
	for i := 0; i < n && req != nil; i++ {
		m, err := message.Parse(req)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m.Exchange)
		next := exchange(t, a, b, req)
		if next == nil {
			if next, err = a.Next(t0); err != nil {
				t.Fatalf("next: %v", err)
			}
		}
		req = next
	}
	if req != nil || a.Queued() != 0 {
		t.Fatalf("still %d queued after %d exchanges", a.Queued(), n)
	}
	return got
}

// TestQueuedRequests: what is asked of an SA while a request of ours is
// outstanding (a window of one, RFC 7296 §2.3) waits in its queue and
// starts, in order, as each exchange before it completes: a child's
// creation, its rekey (with the delete of the old child that follows),
// a liveness check, the IKE SA's rekey, whose new SA takes the work that
// waited on the old one, and the delete of a child and of the IKE SA.
// On the code before, each call returned ErrBusy for the caller to
// retry.
func TestQueuedRequests(t *testing.T) {
	ci, cr := threeChildren(t, "one")
	ini, res, errI, errR := run(t, ci, cr)
	if errI != nil || errR != nil {
		t.Fatal(errI, errR)
	}
	one := ini.Children()[0]
	ping, err := ini.Ping(t0)
	if err != nil || ping == nil {
		t.Fatalf("ping: %v", err)
	}
	for _, call := range []struct {
		name string
		f    func() ([]byte, error)
	}{
		{"create two", func() ([]byte, error) { return ini.CreateChild("two", t0) }},
		{"create two again", func() ([]byte, error) { return ini.CreateChild("two", t0) }},
		{"rekey one", func() ([]byte, error) { return ini.RekeyChild(one, t0) }},
		{"ping", func() ([]byte, error) { return ini.Ping(t0) }},
		{"create three", func() ([]byte, error) { return ini.CreateChild("three", t0) }},
	} {
		if out, err := call.f(); out != nil || err != nil {
			t.Fatalf("%s while busy: %d bytes, %v; want it queued", call.name, len(out), err)
		}
	}
	if !ini.Creating("two") || !ini.Creating("three") || ini.Creating("one") {
		t.Fatal("Creating does not see the queued creations")
	}
	got := drain(t, ini, res, ping, 10)
	want := []message.ExchangeType{message.Informational, message.CreateChildSA, message.CreateChildSA,
		message.Informational, message.Informational, message.CreateChildSA}
	if len(got) != len(want) {
		t.Fatalf("exchanges %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("exchanges %v, want %v", got, want)
		}
	}
	names := map[string]int{}
	for _, c := range ini.Children() {
		names[c.Name]++
	}
	if len(ini.Children()) != 3 || names["one"] != 1 || names["two"] != 1 || names["three"] != 1 || ini.Children()[0] == one {
		t.Fatalf("children %v, want one (rekeyed), two and three", names)
	}
	ini.TakeEvents()
	res.TakeEvents()

	// The IKE rekey goes behind a ping; a child's delete and a rekey of
	// another wait behind it and move to the new SA.
	ping, _ = ini.Ping(t0)
	two, three := ini.Children()[1], ini.Children()[2]
	for _, call := range []func() ([]byte, error){
		func() ([]byte, error) { return ini.RekeyIKE(t0) },
		func() ([]byte, error) { return ini.DeleteChild(two, t0) },
		func() ([]byte, error) { return ini.RekeyChild(three, t0) },
		func() ([]byte, error) { return ini.Ping(t0) }, // of the old SA: dropped
	} {
		if out, err := call(); out != nil || err != nil {
			t.Fatalf("while busy: %d bytes, %v; want it queued", len(out), err)
		}
	}
	exchange(t, ini, res, ping)
	rekey, err := ini.Next(t0)
	if err != nil || rekey == nil {
		t.Fatalf("next: %v", err)
	}
	del := exchange(t, ini, res, rekey)
	newI, newR := rekeyed(t, ini), rekeyed(t, res)
	if ini.Queued() != 0 || newI.Queued() != 2 {
		t.Fatalf("after the IKE rekey: %d queued on the old SA, %d on the new; want 0 and 2", ini.Queued(), newI.Queued())
	}
	exchange(t, ini, res, del)
	next, err := newI.Next(t0)
	if err != nil {
		t.Fatal(err)
	}
	got = drain(t, newI, newR, next, 10)
	want = []message.ExchangeType{message.Informational, message.CreateChildSA, message.Informational}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("exchanges on the new SA %v, want %v", got, want)
	}
	if n := len(newI.Children()); n != 2 {
		t.Fatalf("%d children on the new SA, want 2 (one, three rekeyed)", n)
	}

	// A delete of the IKE SA waits too, and the SA stays up until then.
	ping, _ = newI.Ping(t0)
	if out, err := newI.Delete(t0); out != nil || err != nil || newI.State() != StateEstablished {
		t.Fatalf("delete while busy: %d bytes, %v, %v; want it queued and the SA up", len(out), err, newI.State())
	}
	exchange(t, newI, newR, ping)
	delIKE, err := newI.Next(t0)
	if err != nil || delIKE == nil || newI.State() != StateDeleted {
		t.Fatalf("queued delete: %v, %v", err, newI.State())
	}
	exchange(t, newI, newR, delIKE)
	if newR.State() != StateDeleted {
		t.Fatalf("peer %v, want deleted", newR.State())
	}
}

// TestQueueDropped: work queued on an SA whose outstanding request
// fails it goes with the SA; a queued rekey or delete of a child the
// peer deletes meanwhile is dropped, and Next starts the work after it.
func TestQueueDropped(t *testing.T) {
	ci, cr := threeChildren(t, "one")
	t.Run("SA fails", func(t *testing.T) {
		ini, _, errI, errR := run(t, ci, cr)
		if errI != nil || errR != nil {
			t.Fatal(errI, errR)
		}
		ini.Ping(t0)
		ini.CreateChild("two", t0)
		for i := 0; i < 20 && ini.State() != StateFailed; i++ {
			ini.Tick(ini.NextTimeout())
		}
		if ini.State() != StateFailed || ini.Queued() != 0 {
			t.Fatalf("%v with %d queued, want failed with none", ini.State(), ini.Queued())
		}
		if out, err := ini.Next(t0); out != nil || err != nil {
			t.Fatalf("next on a failed SA: %d bytes, %v", len(out), err)
		}
	})
	t.Run("child gone", func(t *testing.T) {
		ini, res, errI, errR := run(t, ci, cr)
		if errI != nil || errR != nil {
			t.Fatal(errI, errR)
		}
		one := ini.Children()[0]
		ping, _ := ini.Ping(t0)
		ini.RekeyChild(one, t0)
		ini.DeleteChild(one, t0)
		ini.CreateChild("two", t0)
		del, err := res.DeleteChild(res.Children()[0], t0)
		if err != nil {
			t.Fatal(err)
		}
		exchange(t, res, ini, del)
		exchange(t, ini, res, ping)
		next, err := ini.Next(t0)
		if err != nil || ini.Queued() != 0 {
			t.Fatalf("next: %v, %d still queued", err, ini.Queued())
		}
		if m, _ := message.Parse(next); m == nil || m.Exchange != message.CreateChildSA || !ini.Creating("two") {
			t.Fatal("the creation of two did not start after the dropped work")
		}
	})
}
