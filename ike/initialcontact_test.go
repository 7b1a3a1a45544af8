package ike

import (
	"slices"
	"testing"
)

// kinds lists the kinds of events in order.
func kinds(es []Event) []EventKind {
	var k []EventKind
	for _, e := range es {
		k = append(k, e.Kind)
	}
	return k
}

// TestInitialContact: the initiator's IKE_AUTH request carries
// INITIAL_CONTACT exactly when HasContact says it has no other IKE SA
// with the peer's (known) identity, and the responder reports it, after
// EventIKEUp and before the child, naming the authenticated peer.
func TestInitialContact(t *testing.T) {
	for _, tt := range []struct {
		name       string
		hasContact func(l, r string) bool
		remoteID   string
		want       bool   // responder reports EventInitialContact
		asked      string // what HasContact was asked, "" for not at all
	}{
		{"first SA with the peer", func(l, r string) bool { return false }, "b.test", true, "a.test b.test"},
		{"another SA with the peer", func(l, r string) bool { return true }, "b.test", false, "a.test b.test"},
		{"no HasContact", nil, "b.test", false, ""},
		{"peer id not known in advance", func(l, r string) bool { return false }, "%any", false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ci, cr := pairConfigs(t, []string{"aes256-sha256-x25519"}, []string{"aes128gcm16"})
			ci.RemoteID = MustParseIdentity(tt.remoteID)
			var asked string
			if tt.hasContact != nil {
				ci.HasContact = func(l, r Identity) bool {
					asked = l.String() + " " + r.String()
					return tt.hasContact(l.String(), r.String())
				}
			}
			ini, res, errI, errR := run(t, ci, cr)
			if errI != nil || errR != nil || ini.State() != StateEstablished || len(res.Children()) != 1 {
				t.Fatalf("not established: %v, %v", errI, errR)
			}
			if asked != tt.asked {
				t.Errorf("HasContact asked %q, want %q", asked, tt.asked)
			}
			es := res.TakeEvents()
			want := []EventKind{EventIKEUp, EventChildUp}
			if tt.want {
				want = []EventKind{EventIKEUp, EventInitialContact, EventChildUp}
			}
			if !slices.Equal(kinds(es), want) {
				t.Fatalf("responder's events %v, want %v", kinds(es), want)
			}
			if tt.want && es[1].Peer.String() != "a.test" {
				t.Errorf("EventInitialContact names %q, want a.test", es[1].Peer)
			}
			if k := kinds(ini.TakeEvents()); slices.Contains(k, EventInitialContact) {
				t.Errorf("the initiator reported INITIAL_CONTACT: %v", k)
			}
		})
	}
}

// TestInitialContactNotAfterRekey: an IKE SA made by a rekey asks
// nothing and says nothing: INITIAL_CONTACT belongs to IKE_AUTH only.
func TestInitialContactNotAfterRekey(t *testing.T) {
	ci, cr := pairConfigs(t, []string{"aes256-sha256-x25519"}, []string{"aes128gcm16"})
	calls := 0
	ci.HasContact = func(l, r Identity) bool { calls++; return false }
	ini, res := establishedSides(t, ci, cr, false)
	req, err := ini.RekeyIKE(t0)
	if err != nil {
		t.Fatal(err)
	}
	ans, err := res.Handle(req, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ini.Handle(ans, t0); err != nil {
		t.Fatal(err)
	}
	for _, e := range append(ini.TakeEvents(), res.TakeEvents()...) {
		if e.Kind == EventInitialContact {
			t.Fatal("EventInitialContact after an IKE rekey")
		}
	}
	if calls != 1 {
		t.Fatalf("HasContact asked %d times, want once (for IKE_AUTH)", calls)
	}
}
