package ike

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/ike/message"
)

// rekeyAgain lets the peer's engine a send another request as though the
// exchange before had left nothing outstanding: a peer that does not
// follow its rekey with the delete the protocol asks for.
func rekeyAgain(a *SA) {
	a.pending, a.active = nil, nil
}

// readAnswer gives a the answer to its request and takes back the
// request that follows it (the delete of what was rekeyed), as if never
// made.
func readAnswer(a *SA, resp []byte) {
	id := a.nextID
	a.Handle(resp, t0)
	a.nextID = id
	rekeyAgain(a)
}

// answerNotify returns the first notify of b's encrypted answer, read
// with a's keys (0 for none).
func answerNotify(t *testing.T, a *SA, resp []byte) message.NotifyType {
	t.Helper()
	m, err := message.Parse(resp)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := a.decrypt(m, resp)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range message.Notifies(ps) {
		if n.IsValid() {
			return n.Type()
		}
	}
	return 0
}

// TestRekeyRekeyedChildRefused: a peer rekeys the same child 50 times
// and never deletes it. Once it has a replacement, a further rekey of it
// is answered TEMPORARY_FAILURE (RFC 7296 §2.25: it is on its way out)
// and makes nothing: the responder holds the old child and one new one.
func TestRekeyRekeyedChildRefused(t *testing.T) {
	ci, cr := pairConfigs(t, []string{"aes256-sha256-x25519"}, []string{"aes128gcm16"})
	a, b := establishedSides(t, ci, cr, false)
	old := a.Children()[0]
	ups, refused := 0, 0
	for range 50 {
		req, err := a.RekeyChild(old, t0)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := b.Handle(req, t0)
		if resp == nil {
			t.Fatalf("no answer: %v", err)
		}
		if answerNotify(t, a, resp) == message.TemporaryFailure {
			refused++
			if !errors.Is(err, ErrBusy) {
				t.Errorf("refusal with %v, want ErrBusy", err)
			}
		}
		readAnswer(a, resp) // an answer or a refusal; the delete it brings is never sent
		up, _ := childEvents(t, b)
		ups += len(up)
	}
	if n := len(b.Children()); n != 2 || ups != 1 || refused != 49 {
		t.Fatalf("50 rekeys of one child left %d children (%d made, %d refused); want 2 (the old one and its replacement), 49 refused", n, ups, refused)
	}
}

// TestChildrenBounded: a peer rekeys the newest child again and again
// and never deletes the old ones. The responder holds at most
// MaxChildren children; what would pass it is answered
// TEMPORARY_FAILURE.
func TestChildrenBounded(t *testing.T) {
	ci, cr := pairConfigs(t, []string{"aes256-sha256-x25519"}, []string{"aes128gcm16"})
	a, b := establishedSides(t, ci, cr, false)
	for range 50 {
		cs := a.Children()
		req, err := a.RekeyChild(cs[len(cs)-1], t0)
		if err != nil {
			t.Fatal(err)
		}
		resp, _ := b.Handle(req, t0)
		if resp == nil {
			t.Fatal("no answer")
		}
		readAnswer(a, resp)
	}
	if n := len(b.Children()); n != DefaultMaxChildren {
		t.Fatalf("50 chained rekeys without deletes left %d children, want %d (DefaultMaxChildren)", n, DefaultMaxChildren)
	}
}

// TestRekeyChainCut: 50 rekeys of the child, each followed by the delete
// of the old one, as the protocol goes. The newest child names the one
// it replaced until that one is gone, and no more: a long-lived IKE SA
// does not keep every child it ever had alive through Replaces.
func TestRekeyChainCut(t *testing.T) {
	ci, cr := pairConfigs(t, []string{"aes256-sha256-x25519"}, []string{"aes128gcm16"})
	a, b := establishedSides(t, ci, cr, false)
	for range 50 {
		req, err := a.RekeyChild(a.Children()[0], t0)
		if err != nil {
			t.Fatal(err)
		}
		del := exchange(t, a, b, req)
		if next := exchange(t, a, b, del); next != nil {
			t.Fatal("unexpected request after the delete")
		}
	}
	for _, s := range []*SA{a, b} {
		depth := 0
		for c := s.Children()[0]; c != nil && depth < 100; c = c.Replaces {
			depth++
		}
		if len(s.Children()) != 1 || depth > 2 {
			t.Fatalf("after 50 rekeys: %d children, the newest reaches %d through Replaces; want 1, at most 2", len(s.Children()), depth)
		}
	}
}

// TestRekeyRekeyedIKERefused: a peer rekeys the IKE SA 50 times and
// never deletes the old one. Once rekeyed, the old SA answers
// TEMPORARY_FAILURE (RFC 7296 §2.25.2) and makes no further IKE SA.
func TestRekeyRekeyedIKERefused(t *testing.T) {
	ci, cr := pairConfigs(t, []string{"aes256-sha256-x25519"}, []string{"aes128gcm16"})
	a, b := establishedSides(t, ci, cr, false)
	made := 0
	for range 50 {
		req, err := a.RekeyIKE(t0)
		if err != nil {
			t.Fatal(err)
		}
		if resp, _ := b.Handle(req, t0); resp == nil {
			t.Fatal("no answer")
		}
		for _, e := range b.TakeEvents() {
			if e.Kind == EventIKERekeyed {
				made++
			}
		}
		rekeyAgain(a) // the answer is never read: a stays the old SA
	}
	if made != 1 || b.State() != StateEstablished {
		t.Fatalf("50 IKE rekeys of one SA made %d new IKE SAs, want 1", made)
	}
	req, _ := a.RekeyIKE(t0)
	resp, _ := b.Handle(req, t0)
	if n := answerNotify(t, a, resp); n != message.TemporaryFailure {
		t.Fatalf("rekey of a rekeyed IKE SA answered with notify %d, want TEMPORARY_FAILURE", n)
	}
	// Nor does the old SA take a new child: its children moved on.
	rekeyAgain(a)
	a.children = nil
	req, err := a.CreateChild("", t0)
	if err != nil {
		t.Fatal(err)
	}
	resp, _ = b.Handle(req, t0)
	if n := answerNotify(t, a, resp); n != message.TemporaryFailure || len(b.Children()) != 0 {
		t.Fatalf("a new child on the rekeyed IKE SA: notify %d, %d children; want TEMPORARY_FAILURE, none", n, len(b.Children()))
	}
}

// TestRekeyedIKEExpires: the peer rekeys the IKE SA and never deletes
// the old one. The old SA asks for Tick at ReplacedTimeout and then
// deletes itself; the new one keeps the child.
func TestRekeyedIKEExpires(t *testing.T) {
	ci, cr := pairConfigs(t, []string{"aes256-sha256-x25519"}, []string{"aes128gcm16"})
	a, b := establishedSides(t, ci, cr, false)
	req, _ := a.RekeyIKE(t0)
	a.Handle(exchangeAnswer(t, b, req), t0) // a deletes its old SA; the delete is lost
	nb := rekeyed(t, b)
	at := b.NextTimeout()
	if at.IsZero() {
		t.Fatal("the replaced IKE SA never expires: NextTimeout is zero")
	}
	if out, err := b.Tick(at.Add(-time.Second)); out != nil || err != nil || b.State() != StateEstablished {
		t.Fatalf("before its time: %v, %v, %v", out != nil, err, b.State())
	}
	out, err := b.Tick(at)
	if err != nil || out == nil || b.State() != StateDeleted || at.Sub(t0) != ReplacedTimeout {
		t.Fatalf("at %v: message %v, %v, state %v; want a delete at %v", at.Sub(t0), out != nil, err, b.State(), ReplacedTimeout)
	}
	if m, _ := message.Parse(out); m.Exchange != message.Informational {
		t.Fatalf("sent %v, want an INFORMATIONAL delete", m.Exchange)
	}
	for _, e := range b.TakeEvents() {
		if e.Kind == EventChildDown {
			t.Fatal("the expiry of the old IKE SA took a child down")
		}
	}
	if nb.State() != StateEstablished || len(nb.Children()) != 1 {
		t.Fatalf("new IKE SA %v with %d children", nb.State(), len(nb.Children()))
	}
}

func exchangeAnswer(t *testing.T, b *SA, req []byte) []byte {
	t.Helper()
	resp, err := b.Handle(req, t0)
	if err != nil || resp == nil {
		t.Fatalf("answering: %v", err)
	}
	return resp
}

// TestNarrowedSelectorsFitThePayload: a TS payload counts its selectors
// in one byte. A peer offering 200 copies of a range that meets both of
// our two remote_ts prefixes narrowed to 400 selectors, which the answer
// carried under a count of 144 (400 mod 256), a payload no peer parses,
// and the child was made with all 400. Duplicates go; more than 255
// after that is TS_UNACCEPTABLE, and no child is made.
func TestNarrowedSelectorsFitThePayload(t *testing.T) {
	ci, cr := pairConfigs(t, []string{"aes256-sha256-x25519"}, []string{"aes128gcm16"})
	cr.Child.RemoteTS = []netip.Prefix{netip.MustParsePrefix("198.51.100.0/25"), netip.MustParsePrefix("198.51.100.128/25")}
	whole := message.Selector{Start: netip.MustParseAddr("198.51.100.0"), End: netip.MustParseAddr("198.51.100.255"), EndPort: 0xffff}
	// The same range twice, then as 200 distinct ranges: 2 selectors
	// once duplicates go, then 400.
	distinct := make([]message.Selector, 200)
	for i := range distinct {
		distinct[i] = whole
		distinct[i].EndPort = 0xffff - uint16(i)
	}
	// 200 ranges of a /16 less its first and last address, each some
	// 30 prefixes: 200 selectors, within the payload's count, but about
	// 6,000 prefixes, more than the SAD holds (sa.MaxTSPrefixes).
	slash16 := []netip.Prefix{netip.MustParsePrefix("198.51.0.0/16")}
	odd := make([]message.Selector, 200)
	for i := range odd {
		odd[i] = message.Selector{Start: netip.MustParseAddr("198.51.0.1"), End: netip.MustParseAddr("198.51.255.254"), EndPort: 0xffff - uint16(i)}
	}
	for _, tt := range []struct {
		name     string
		remoteTS []netip.Prefix // the responder's, when not the two /25s
		offer    []message.Selector
		want     message.NotifyType
		wantTSi  int
	}{
		{"duplicates", nil, []message.Selector{whole, whole, whole}, 0, 2},
		{"400 after narrowing", nil, distinct, message.TSUnacceptable, 0},
		{"more prefixes than the SAD holds", slash16, odd, message.TSUnacceptable, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cr := *cr
			if tt.remoteTS != nil {
				cr.Child.RemoteTS = tt.remoteTS
			}
			a, b := establishedSides(t, ci, &cr, false)
			before := len(b.Children())
			sa := message.AppendSA(nil, []message.Proposal{mustProposals(t, message.ProtoESP, "aes128gcm16")[0].Message(1, []byte{1, 2, 3, 4})})
			ps := []message.Payload{
				{Type: message.TypeSA, Body: sa},
				{Type: message.TypeNONC, Body: make([]byte, 32)},
				{Type: message.TypeTSi, Body: message.AppendTS(nil, tt.offer)},
				{Type: message.TypeTSr, Body: message.AppendTS(nil, prefixSelectors(ci.Child.RemoteTS))},
			}
			req, err := a.request(message.CreateChildSA, ps, t0)
			if err != nil {
				t.Fatal(err)
			}
			var resp []byte
			for _, p := range a.Packets(req) { // 200 selectors take fragments
				resp, err = b.Handle(p, t0)
			}
			if resp == nil {
				t.Fatalf("no answer: %v", err)
			}
			var got []message.Payload
			for _, p := range b.Packets(resp) { // 400 selectors took fragments
				m, err := message.Parse(p)
				if err != nil {
					t.Fatal(err)
				}
				if got, err = a.decrypt(m, p); err != nil && err != errFragmentHeld {
					t.Fatal(err)
				}
			}
			var notified message.NotifyType
			for _, n := range message.Notifies(got) {
				notified = n.Type()
			}
			made := len(b.Children()) - before
			body := message.Get(got, message.TypeTSi)
			tsi, err := message.TS(body).Selectors()
			if tt.want != 0 {
				if notified != tt.want || made != 0 {
					t.Fatalf("answered notify %v, %d children made, TSi counting %d selectors in %d bytes (%v); want %v and none made", notified, made, body[0], len(body), err, tt.want)
				}
				return
			}
			if err != nil || len(tsi) != tt.wantTSi || made != 1 {
				t.Fatalf("answer's TSi %v (%v), %d children made; want %d selectors, 1 child", tsi, err, made, tt.wantTSi)
			}
		})
	}
}
