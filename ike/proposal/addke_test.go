package proposal

import (
	"errors"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/ike/message"
)

// TestParseAddKE: proposals with RFC 9370's additional key exchanges, as
// swanctl writes them, parse to their canonical form; what ipsecd
// cannot run is refused with a message that says why.
func TestParseAddKE(t *testing.T) {
	ike, esp := message.ProtoIKE, message.ProtoESP
	for _, tt := range []struct {
		proto   message.ProtocolID
		in, out string
		err     string // a part of the error, when out is ""
	}{
		{ike, "aes256-sha384-x25519-ke1_mlkem768", "aes256-sha384-x25519-ke1_mlkem768-prfsha384", ""},
		{ike, "aes256-sha384-ecp384-ke1_mlkem1024", "aes256-sha384-ecp384-ke1_mlkem1024-prfsha384", ""},
		{ike, "aes256gcm16-prfsha384-x25519-ke1_mlkem768-ke1_none", "aes256gcm16-prfsha384-x25519-ke1_mlkem768-ke1_none", ""},
		{ike, "aes256-sha256-x25519-ke1_mlkem768-ke2_mlkem1024", "aes256-sha256-x25519-ke1_mlkem768-ke2_mlkem1024-prfsha256", ""},
		{ike, "aes256-sha256-x25519-ke1_curve25519", "aes256-sha256-x25519-ke1_x25519-prfsha256", ""},
		{ike, "aes256-sha384-mlkem768", "aes256-sha384-mlkem768-prfsha384", ""},
		{ike, "aes256-sha384-mlkem1024", "aes256-sha384-mlkem1024-prfsha384", ""},
		{ike, "aes256-sha384-x25519-ke7_ecp256", "aes256-sha384-x25519-ke7_ecp256-prfsha384", ""},
		{ike, "aes256-sha384-x25519-ke8_mlkem768", "", "unknown algorithm"},
		{ike, "aes256-sha384-x25519-ke1_aes256", "", "unknown algorithm"},
		{ike, "aes256-sha384-x25519-ke1_mlkem512", "", "ML-KEM-512 is not implemented"},
		{ike, "aes256-sha384-mlkem512", "", "ML-KEM-512 is not implemented"},
		{ike, "aes256-sha384-ke1_mlkem768", "", "no key exchange group"},
		{esp, "aes256gcm16-x25519-ke1_mlkem768", "aes256gcm16-x25519-ke1_mlkem768-noesn", ""},
		{esp, "aes256gcm16-ke1_mlkem768", "", "come after a key exchange group"},
		{esp, "aes256gcm16-mlkem768", "aes256gcm16-mlkem768-noesn", ""},
		{esp, "aes256gcm16-x25519-ke1_none", "aes256gcm16-x25519-ke1_none-noesn", ""},
	} {
		t.Run(tt.in, func(t *testing.T) {
			p, err := Parse(tt.proto, tt.in)
			if tt.out == "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %q, %v; want an error with %q", p, err, tt.err)
				}
				return
			}
			if err != nil || p.String() != tt.out {
				t.Fatalf("got %q, %v; want %q", p, err, tt.out)
			}
		})
	}
}

// TestSelectMultiKE: choosing additional key exchanges (RFC 9370
// §2.2.1), and what Select, for an exchange that runs none, makes of the
// same offers.
func TestSelectMultiKE(t *testing.T) {
	ike := message.ProtoIKE
	for _, tt := range []struct {
		name         string
		ours, theirs []string
		want         string // "" : no proposal chosen
		wantCCSA     string // Select: without additional exchanges
	}{
		{"both hybrid", []string{"aes256-sha384-x25519-ke1_mlkem768"}, []string{"aes256-sha384-x25519-ke1_mlkem768"},
			"aes256-sha384-prfsha384-x25519-ke1_mlkem768", ""},
		{"peer's order among ours", []string{"aes256-sha384-x25519-ke1_mlkem768-ke1_mlkem1024"}, []string{"aes256-sha384-x25519-ke1_mlkem1024-ke1_mlkem768"},
			"aes256-sha384-prfsha384-x25519-ke1_mlkem1024", ""},
		{"we require, peer has none", []string{"aes256-sha384-x25519-ke1_mlkem768"}, []string{"aes256-sha384-x25519"}, "", ""},
		{"peer requires, we have none", []string{"aes256-sha384-x25519"}, []string{"aes256-sha384-x25519-ke1_mlkem768"}, "", ""},
		{"ours optional, peer has none", []string{"aes256-sha384-x25519-ke1_mlkem768-ke1_none"}, []string{"aes256-sha384-x25519"},
			"aes256-sha384-prfsha384-x25519", "aes256-sha384-prfsha384-x25519"},
		{"theirs optional, we have none", []string{"aes256-sha384-x25519"}, []string{"aes256-sha384-x25519-ke1_mlkem768-ke1_none"},
			"aes256-sha384-prfsha384-x25519-ke1_none", "aes256-sha384-prfsha384-x25519-ke1_none"},
		{"both optional", []string{"aes256-sha384-x25519-ke1_mlkem768-ke1_none"}, []string{"aes256-sha384-x25519-ke1_mlkem768-ke1_none"},
			"aes256-sha384-prfsha384-x25519-ke1_mlkem768", "aes256-sha384-prfsha384-x25519-ke1_none"},
		{"peer prefers none", []string{"aes256-sha384-x25519-ke1_mlkem768-ke1_none"}, []string{"aes256-sha384-x25519-ke1_none-ke1_mlkem768"},
			"aes256-sha384-prfsha384-x25519-ke1_none", "aes256-sha384-prfsha384-x25519-ke1_none"},
		{"two exchanges", []string{"aes256-sha384-x25519-ke1_mlkem768-ke2_mlkem1024"}, []string{"aes256-sha384-x25519-ke1_mlkem768-ke2_mlkem1024"},
			"aes256-sha384-prfsha384-x25519-ke1_mlkem768-ke2_mlkem1024", ""},
		{"second exchange missing", []string{"aes256-sha384-x25519-ke1_mlkem768-ke2_mlkem1024"}, []string{"aes256-sha384-x25519-ke1_mlkem768"}, "", ""},
		{"ML-KEM alone", []string{"aes256-sha384-mlkem768"}, []string{"aes256-sha384-mlkem768"},
			"aes256-sha384-prfsha384-mlkem768", "aes256-sha384-prfsha384-mlkem768"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ours, theirs := mustParse(t, ike, tt.ours...), mustParse(t, ike, tt.theirs...)
			var wire []message.Proposal
			for i, p := range theirs {
				wire = append(wire, p.Message(uint8(i+1), nil)) // as sent, ADDKE and all
			}
			s, err := SelectMultiKE(ours, wire)
			switch {
			case tt.want == "" && !errors.Is(err, ErrNoProposalChosen):
				t.Errorf("SelectMultiKE: got %q, %v; want no proposal chosen", s, err)
			case tt.want != "" && (err != nil || s.String() != tt.want):
				t.Errorf("SelectMultiKE: got %q, %v; want %q", s, err, tt.want)
			}
			if err == nil {
				// The initiator checks the answer the same way.
				c, err := CheckChoiceMultiKE(theirs, []message.Proposal{s.Proposal()})
				if err != nil || c.String() != s.String() {
					t.Errorf("CheckChoiceMultiKE of the answer: got %q, %v", c, err)
				}
			}
			s, err = Select(ours, wire, false)
			switch {
			case tt.wantCCSA == "" && err == nil:
				t.Errorf("Select: got %q; want no proposal chosen (no additional exchange runs)", s)
			case tt.wantCCSA != "" && (err != nil || s.String() != tt.wantCCSA):
				t.Errorf("Select: got %q, %v; want %q", s, err, tt.wantCCSA)
			}
		})
	}
}

// TestMessagesMultiKE: what IKE_SA_INIT and CREATE_CHILD_SA offer of
// proposals with additional exchanges. An optional one is followed by a
// copy without them, which a peer that does not know transform type 6
// (strongSwan 5.9) can choose; Messages, for an exchange that runs no
// additional exchange, offers only what can do without.
func TestMessagesMultiKE(t *testing.T) {
	ps := mustParse(t, message.ProtoIKE, "aes256-sha384-x25519-ke1_mlkem768-ke1_none", "aes256-sha384-x25519-ke1_mlkem1024", "aes128-sha256-ecp256")
	names := func(ms []message.Proposal) string {
		var out []string
		for _, m := range ms {
			out = append(out, FormatList([]message.Proposal{m}))
			if int(m.Num) != len(out) {
				t.Errorf("proposal %d numbered %d", len(out), m.Num)
			}
		}
		return strings.Join(out, ", ")
	}
	if got, want := names(MessagesMultiKE(ps, nil)), "aes256-sha384-x25519-ke1_mlkem768-ke1_none-prfsha384, aes256-sha384-x25519-prfsha384, aes256-sha384-x25519-ke1_mlkem1024-prfsha384, aes128-sha256-ecp256-prfsha256"; got != want {
		t.Errorf("IKE_SA_INIT:\n got %s\nwant %s", got, want)
	}
	if got, want := names(Messages(ps, nil)), "aes256-sha384-x25519-prfsha384, aes128-sha256-ecp256-prfsha256"; got != want {
		t.Errorf("Messages:\n got %s\nwant %s", got, want)
	}
}

// FuzzParseIKE: whatever Parse accepts as an IKE proposal re-parses to
// itself from its canonical string, and a peer's proposal of the same
// names (unchecked, ADDKE types and all) chosen against it by
// SelectMultiKE gives an answer that CheckChoiceMultiKE accepts.
func FuzzParseIKE(f *testing.F) {
	for _, s := range []string{"aes256-sha384-x25519-ke1_mlkem768", "aes256-sha384-x25519-ke1_mlkem768-ke1_none-ke2_mlkem1024",
		"aes256gcm16-prfsha256-mlkem1024", "aes128-sha256-ecp256-ke7_none", "aes256-sha384-x25519-ke1_mlkem512"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := Parse(message.ProtoIKE, s)
		if err != nil {
			return
		}
		if q, err := Parse(message.ProtoIKE, p.String()); err != nil || q.String() != p.String() {
			t.Fatalf("re-parse of %q: %q, %v", p, q, err)
		}
		theirs := p.Message(1, nil)
		suite, err := SelectMultiKE([]Proposal{p}, []message.Proposal{theirs})
		if err != nil {
			t.Fatalf("%q does not match itself: %v", p, err)
		}
		if _, err := CheckChoiceMultiKE([]Proposal{p}, []message.Proposal{suite.Proposal()}); err != nil {
			t.Fatalf("answer %q to %q refused: %v", suite, p, err)
		}
	})
}
