package proposal

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/sa"
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
		// Every integrity algorithm runs in ESP (package sa); sha1 only
		// there (TestESPOnly).
		{message.ProtoESP, "aes256-sha384", "aes256-sha384-noesn"},
		{message.ProtoESP, "aes128-sha512-x25519", "aes128-sha512-x25519-noesn"},
		{message.ProtoESP, "aes256-sha256-sha384", "aes256-sha256-sha384-noesn"},
		{message.ProtoESP, "aes128-sha1", "aes128-sha1-noesn"},
		{message.ProtoESP, "aes256-aes192-aes128-sha1-sha256-modp2048", "aes256-aes192-aes128-sha1-sha256-modp2048-noesn"},
		{message.ProtoIKE, "aes192-sha256-ecp256", "aes192-sha256-ecp256-prfsha256"},
		{message.ProtoIKE, "aes256-sha1-modp2048", ""},
		{message.ProtoIKE, "aes256-sha1-sha256-prfsha256-modp2048", ""},
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

// TestESPOnly: an IKE proposal with sha1, which is for ESP only, is
// refused with its name, saying what IKE takes; an ESP one parses.
func TestESPOnly(t *testing.T) {
	_, err := Parse(message.ProtoIKE, "aes256-sha1-x25519")
	want := `proposal "aes256-sha1-x25519": "sha1" is for ESP proposals only: IKE's own SA takes sha256, sha384 or sha512 for integrity`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	if _, err := Parse(message.ProtoESP, "aes256-sha1"); err != nil {
		t.Fatalf("ESP: %v", err)
	}
}

// TestSelectRuns: as responder, a transform the peer offers first is
// skipped when it cannot run for the protocol (sha1 for IKE's own SA),
// even in a proposal of ours that names it (one not made by Parse), and
// the next one both offer is chosen; with none left, NO_PROPOSAL_CHOSEN.
func TestSelectRuns(t *testing.T) {
	ike := message.ProtoIKE
	ours := []Proposal{{Protocol: ike, Algs: []Alg{AES256, Integ1, Integ256, PRF256, X25519}}}
	theirs := []message.Proposal{{Num: 1, Protocol: ike, Transforms: []message.Transform{
		AES256.Transform(), Integ1.Transform(), Integ256.Transform(), PRF256.Transform(), X25519.Transform()}}}
	s, err := Select(ours, theirs, false)
	if err != nil || s.String() != "aes256-sha256-prfsha256-x25519" {
		t.Fatalf("got %q, %v; want aes256-sha256-prfsha256-x25519", s, err)
	}
	theirs[0].Transforms = slices.Delete(theirs[0].Transforms, 2, 3)
	if s, err := Select(ours, theirs, false); !errors.Is(err, ErrNoProposalChosen) {
		t.Fatalf("got %q, %v; want NO_PROPOSAL_CHOSEN", s, err)
	}
	// The initiator refuses such an answer too.
	if _, err := CheckChoice(ours, theirs, false); !errors.Is(err, ErrBadChoice) {
		t.Fatalf("CheckChoice: got %v, want ErrBadChoice", err)
	}
}

// TestESPTable: every ESP transform that Parse accepts runs in package
// sa, with the key material the key derivation gives it (KeySize) and
// the ICV the transform stands for, and a Config made from it passes
// sa.Check.
func TestESPTable(t *testing.T) {
	n := 0
	for _, a := range algs {
		if a.Type != message.TransENCR && a.Type != message.TransINTEG {
			continue
		}
		info, tr, ok := a.ESP()
		p := a.Name
		switch {
		case a.Type == message.TransINTEG:
			p = "aes128-" + a.Name
		case !a.IsAEAD():
			p += "-sha256"
		}
		_, err := Parse(message.ProtoESP, p)
		if !ok {
			if err == nil {
				t.Errorf("%s: Parse accepts it for ESP, and sa does not run it", a.Name)
			}
			continue
		}
		n++
		if err != nil {
			t.Errorf("%s: sa runs it, and Parse refuses it for ESP: %v", a.Name, err)
		}
		if a.KeySize() != tr.KeyBytes || !slices.Contains(info.KeyBytes, tr.KeyBytes) {
			t.Errorf("%s: derives %d key bytes, the table says %d, sa's %s takes %v", a.Name, a.KeySize(), tr.KeyBytes, info.Name, info.KeyBytes)
		}
		if info.Kind != sa.KindEnc && (a.ICVSize()*8 != tr.Bits || !slices.Contains(info.Bits, tr.Bits)) {
			t.Errorf("%s: ICV %d bits, the table says %d, sa's %s allows %v", a.Name, a.ICVSize()*8, tr.Bits, info.Name, info.Bits)
		}
		c := sa.Config{Src: netip.MustParseAddr("192.0.2.1"), Dst: netip.MustParseAddr("192.0.2.2"), SPI: 0x1001, Dir: sa.DirOut,
			Mode: sa.ModeTunnel, IfID: 1, Encap: &sa.Encap{SrcPort: 4500, DstPort: 4500}}
		alg := &sa.Algorithm{Name: info.Name, Key: make([]byte, tr.KeyBytes), Bits: tr.Bits}
		for i := range alg.Key {
			alg.Key[i] = byte(i + 1)
		}
		switch info.Kind {
		case sa.KindAEAD:
			c.AEAD = alg
		case sa.KindEnc:
			c.Enc, c.Auth = alg, &sa.Algorithm{Name: sa.AlgHMACSHA2, Key: make([]byte, 32), Bits: 128}
		case sa.KindAuth:
			c.Enc, c.Auth = &sa.Algorithm{Name: sa.AlgCBC, Key: make([]byte, 16)}, alg
		}
		if err := sa.Check(&c); err != nil {
			t.Errorf("%s: %v", a.Name, err)
		}
	}
	if n != 10 {
		t.Errorf("%d ESP algorithms, want 10 (aes128, aes192, aes256, aes128gcm16, aes256gcm16, chacha20poly1305, sha1, sha256, sha384, sha512)", n)
	}
}
