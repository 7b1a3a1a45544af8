package proposal

import (
	"errors"
	"testing"

	"github.com/ipsecd/ipsecd/ike/message"
)

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		proto   message.ProtocolID
		in, out string // out "" means an error
	}{
		{message.ProtoIKE, "aes256-sha256-x25519", "aes256-sha256-x25519-prfsha256"},
		{message.ProtoIKE, "aes128gcm16-prfsha256-ecp256", "aes128gcm16-prfsha256-ecp256"},
		{message.ProtoIKE, "aes256gcm16-prfsha384-ecp384", "aes256gcm16-prfsha384-ecp384"},
		{message.ProtoIKE, "chacha20poly1305-prfsha512-curve25519", "chacha20poly1305-prfsha512-x25519"},
		{message.ProtoIKE, "aes128-aes256-sha384-sha512-modp2048", "aes128-aes256-sha384-sha512-modp2048-prfsha384-prfsha512"},
		{message.ProtoESP, "aes128gcm16", "aes128gcm16-noesn"},
		{message.ProtoESP, "aes128gcm16-x25519", "aes128gcm16-x25519-noesn"},
		{message.ProtoESP, "chacha20poly1305-ecp384-esn", "chacha20poly1305-ecp384-esn"},
		{message.ProtoESP, "aes256-sha256-modp2048", "aes256-sha256-modp2048-noesn"},
		{message.ProtoIKE, "aes128gcm16-ecp256", ""},                                     // AEAD needs a prf
		{message.ProtoIKE, "aes256-x25519", ""},                                          // no integrity
		{message.ProtoIKE, "aes256-sha256", ""},                                          // no group
		{message.ProtoIKE, "aes256-sha256-modp1024", "aes256-sha256-modp1024-prfsha256"}, // legacy, see TestLegacy
		{message.ProtoIKE, "aes256-sha256-modp1536", ""},                                 // not implemented
		{message.ProtoIKE, "aes128gcm16-sha256-prfsha256-x25519", ""},
		{message.ProtoIKE, "aes256-sha256-x25519-esn", ""},
		{message.ProtoESP, "aes128gcm16-prfsha256", ""},
		{message.ProtoESP, "3des-sha1", ""},
		{message.ProtoESP, "", ""},
	} {
		t.Run(tt.in, func(t *testing.T) {
			p, err := Parse(tt.proto, tt.in)
			if tt.out == "" {
				if err == nil {
					t.Fatalf("got %q, want an error", p)
				}
				return
			}
			if err != nil || p.String() != tt.out {
				t.Fatalf("got %q, %v; want %q", p, err, tt.out)
			}
			// The canonical string parses to itself.
			if q, err := Parse(tt.proto, p.String()); err != nil || q.String() != tt.out {
				t.Fatalf("re-parse: got %q, %v", q, err)
			}
		})
	}
}

func TestSizes(t *testing.T) {
	for _, tt := range []struct {
		a        Alg
		key, icv int
	}{
		{AES128, 16, 16}, {AES256, 32, 16}, {AES128GCM, 20, 16}, {AES256GCM, 36, 16}, {ChaCha20P, 36, 16},
		{Integ256, 32, 16}, {Integ384, 48, 24}, {Integ512, 64, 32},
	} {
		if k, i := tt.a.KeySize(), tt.a.ICVSize(); k != tt.key || i != tt.icv {
			t.Errorf("%s: got key %d icv %d, want %d %d", tt.a.Name, k, i, tt.key, tt.icv)
		}
	}
}

func mustParse(t *testing.T, proto message.ProtocolID, ss ...string) []Proposal {
	t.Helper()
	ps, err := ParseList(proto, ss)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func TestSelect(t *testing.T) {
	ike := message.ProtoIKE
	for _, tt := range []struct {
		name         string
		ours, theirs []string
		ignoreDH     bool
		want         string // "" for NO_PROPOSAL_CHOSEN
	}{
		{"same", []string{"aes256-sha256-x25519"}, []string{"aes256-sha256-x25519"}, false, "aes256-sha256-prfsha256-x25519"},
		{"their order within a type", []string{"aes128-aes256-sha256-x25519-ecp256"}, []string{"aes256-aes128-sha256-ecp256-x25519"}, false, "aes256-sha256-prfsha256-ecp256"},
		{"our proposal order", []string{"aes128gcm16-prfsha256-ecp256", "aes256-sha256-x25519"}, []string{"aes256-sha256-x25519", "aes128gcm16-prfsha256-ecp256"}, false, "aes128gcm16-prfsha256-ecp256"},
		{"key length differs", []string{"aes128-sha256-x25519"}, []string{"aes256-sha256-x25519"}, false, ""},
		{"group differs", []string{"aes256-sha256-x25519"}, []string{"aes256-sha256-ecp384"}, false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Select(mustParse(t, ike, tt.ours...), Messages(mustParse(t, ike, tt.theirs...), nil), tt.ignoreDH)
			if tt.want == "" {
				if !errors.Is(err, ErrNoProposalChosen) {
					t.Fatalf("got %v, %v; want NO_PROPOSAL_CHOSEN", s, err)
				}
				return
			}
			if err != nil || s.String() != tt.want {
				t.Fatalf("got %q, %v; want %q", s, err, tt.want)
			}
			// The initiator accepts the answer built from it.
			if _, err := CheckChoice(mustParse(t, ike, tt.theirs...), []message.Proposal{s.Proposal()}, tt.ignoreDH); err != nil {
				t.Fatalf("initiator refuses the answer: %v", err)
			}
		})
	}
}

func TestSelectESP(t *testing.T) {
	esp := message.ProtoESP
	spi := []byte{0xc1, 2, 3, 4}
	// In IKE_AUTH the groups play no part.
	theirs := []message.Proposal{mustParse(t, esp, "aes128gcm16-x25519")[0].WithoutDH().Message(1, spi)}
	s, err := Select(mustParse(t, esp, "aes128gcm16-x25519"), theirs, true)
	if err != nil || s.String() != "aes128gcm16-noesn" || string(s.SPI) != string(spi) {
		t.Fatalf("got %q spi %x, %v", s, s.SPI, err)
	}
	// With PFS required in CREATE_CHILD_SA, a proposal without a group
	// does not match.
	if _, err := Select(mustParse(t, esp, "aes128gcm16-x25519"), theirs, false); err == nil {
		t.Fatal("a proposal without PFS matched one that needs it")
	}
}

func TestCheckChoiceRefuses(t *testing.T) {
	ours := mustParse(t, message.ProtoIKE, "aes128-aes256-sha256-x25519")
	two := ours[0].Message(1, nil) // two ENCR transforms: not a choice
	if _, err := CheckChoice(ours, []message.Proposal{two}, false); !errors.Is(err, ErrBadChoice) {
		t.Fatalf("got %v, want ErrBadChoice", err)
	}
	other := mustParse(t, message.ProtoIKE, "aes256gcm16-prfsha256-x25519")[0].Message(1, nil)
	if _, err := CheckChoice(ours, []message.Proposal{other}, false); !errors.Is(err, ErrBadChoice) {
		t.Fatalf("got %v, want ErrBadChoice", err)
	}
}
