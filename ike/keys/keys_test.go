package keys

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/ike/proposal"
)

func unhex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// TestPRFVectors: RFC 4231 §4.3 (test case 2) for each PRF.
func TestPRFVectors(t *testing.T) {
	for _, tt := range []struct {
		alg  proposal.Alg
		want string
	}{
		{proposal.PRF256, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
		{proposal.PRF384, "af45d2e376484031617f78d2b58a6b1b9c7ef464f5a01b47e42ec3736322445e8e2240ca5e69e2c78b3239ecfab21649"},
		{proposal.PRF512, "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737"},
	} {
		got := NewPRF(tt.alg).Sum([]byte("Jefe"), []byte("what do ya "), []byte("want for nothing?"))
		if !bytes.Equal(got, unhex(tt.want)) {
			t.Errorf("%s: got %x, want %s", tt.alg.Name, got, tt.want)
		}
	}
}

// TestPRFPlus checks prf+ against its definition in RFC 7296 §2.13 written
// out: T1 = prf(K, S | 0x01), T2 = prf(K, T1 | S | 0x02), ...
func TestPRFPlus(t *testing.T) {
	p := NewPRF(proposal.PRF256)
	k, s := []byte("key"), []byte("seed")
	t1 := p.Sum(k, s, []byte{1})
	t2 := p.Sum(k, t1, s, []byte{2})
	t3 := p.Sum(k, t2, s, []byte{3})
	want := append(append(append([]byte(nil), t1...), t2...), t3...)[:70]
	if got := p.Plus(k, s, 70); !bytes.Equal(got, want) {
		t.Fatalf("got %x, want %x", got, want)
	}
}

func suite(t *testing.T, proto message.ProtocolID, s string) proposal.Suite {
	t.Helper()
	p, err := proposal.Parse(proto, s)
	if err != nil {
		t.Fatal(err)
	}
	su, err := proposal.Select([]proposal.Proposal{p}, []message.Proposal{p.Message(1, nil)}, false)
	if err != nil {
		t.Fatal(err)
	}
	return su
}

// TestDeriveIKESplit checks the order and sizes of §2.14's split.
func TestDeriveIKESplit(t *testing.T) {
	s := suite(t, message.ProtoIKE, "aes256-sha384-x25519")
	k := DeriveIKE(s, []byte("skeyseed"), []byte("ni"), []byte("nr"), 1, 2)
	seed := append([]byte("ninr"), 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2)
	all := NewPRF(s.PRF).Plus([]byte("skeyseed"), seed, 48+48+48+32+32+48+48)
	got := bytes.Join([][]byte{k.D, k.AI, k.AR, k.EI, k.ER, k.PI, k.PR}, nil)
	if !bytes.Equal(got, all) || len(k.D) != 48 || len(k.AI) != 48 || len(k.EI) != 32 || len(k.PR) != 48 {
		t.Fatalf("split: sizes %d %d %d %d", len(k.D), len(k.AI), len(k.EI), len(k.PR))
	}
	g := DeriveIKE(suite(t, message.ProtoIKE, "aes128gcm16-prfsha256-ecp256"), []byte("s"), nil, nil, 1, 2)
	if len(g.AI) != 0 || len(g.EI) != 20 || len(g.D) != 32 {
		t.Fatalf("GCM: got SK_ai %d, SK_ei %d (want 0, 20 with salt)", len(g.AI), len(g.EI))
	}
}

// TestChildKeysOrder: initiator-to-responder keys first, encryption
// before integrity (§2.17), from KEYMAT = prf+(SK_d, g^ir | Ni | Nr).
func TestChildKeysOrder(t *testing.T) {
	prf := NewPRF(proposal.PRF256)
	esp := suite(t, message.ProtoESP, "aes128-sha256")
	i, r := ChildKeys(prf, []byte("skd"), []byte("gir"), []byte("ni"), []byte("nr"), esp)
	km := prf.Plus([]byte("skd"), []byte("girninr"), 2*(16+32))
	want := [][]byte{km[:16], km[16:48], km[48:64], km[64:]}
	for n, got := range [][]byte{i.Enc, i.Integ, r.Enc, r.Integ} {
		if !bytes.Equal(got, want[n]) {
			t.Fatalf("key %d: got %x, want %x", n, got, want[n])
		}
	}
	gi, _ := ChildKeys(prf, []byte("skd"), nil, []byte("ni"), []byte("nr"), suite(t, message.ProtoESP, "aes128gcm16"))
	if len(gi.Enc) != 20 || len(gi.Integ) != 0 {
		t.Fatalf("GCM child: got %d+%d bytes, want 20 (key and salt) + 0", len(gi.Enc), len(gi.Integ))
	}
}

func TestPSKAuth(t *testing.T) {
	prf := NewPRF(proposal.PRF256)
	got := PSKAuth(prf, []byte("psk"), []byte("msg1"), []byte("nr"), []byte("skpi"), []byte("id"))
	inner := prf.Sum([]byte("psk"), []byte("Key Pad for IKEv2"))
	want := prf.Sum(inner, []byte("msg1nr"), prf.Sum([]byte("skpi"), []byte("id")))
	if !bytes.Equal(got, want) {
		t.Fatalf("got %x, want %x", got, want)
	}
}

var skSuites = []string{
	"aes128-sha256-x25519", "aes256-sha384-x25519", "aes256-sha512-x25519",
	"aes128gcm16-prfsha256-x25519", "aes256gcm16-prfsha384-x25519", "chacha20poly1305-prfsha512-x25519",
}

func TestSKRoundTrip(t *testing.T) {
	for _, name := range skSuites {
		t.Run(name, func(t *testing.T) {
			s := suite(t, message.ProtoIKE, name)
			k := DeriveIKE(s, []byte("skeyseed"), []byte("ni"), []byte("nr"), 1, 2)
			seal, err := NewSKCipher(s, k.EI, k.AI)
			if err != nil {
				t.Fatal(err)
			}
			open, _ := NewSKCipher(s, k.EI, k.AI)
			inner := message.AppendID(nil, message.IDFQDN, []byte("a.test"))
			plain, _ := message.AppendPayloads(nil, []message.Payload{{Type: message.TypeIDi, Body: inner}})
			h := message.HeaderFields{ISPI: 1, RSPI: 2, Exchange: message.IKEAuth, Flags: message.FlagInitiator, MessageID: 1}
			for n := 0; n < 2; n++ {
				msg, err := seal.Seal(h, message.TypeIDi, plain)
				if err != nil {
					t.Fatal(err)
				}
				m, err := message.Parse(msg)
				if err != nil {
					t.Fatal(err)
				}
				sk := m.Get(message.TypeSK)
				got, err := open.Open(msg, sk)
				if err != nil || !bytes.Equal(got, plain) {
					t.Fatalf("open: got %x, %v; want %x", got, err, plain)
				}
				// Any changed byte, header included, fails.
				for i := range msg {
					bad := bytes.Clone(msg)
					bad[i] ^= 0x40
					if _, err := open.Open(bad, bad[len(bad)-len(sk):]); !errors.Is(err, ErrAuth) {
						t.Fatalf("byte %d flipped: got %v, want ErrAuth", i, err)
					}
				}
				// The other direction's key does not open it.
				other, _ := NewSKCipher(s, k.ER, k.AR)
				if _, err := other.Open(msg, sk); !errors.Is(err, ErrAuth) {
					t.Fatalf("opened with SK_er: %v", err)
				}
			}
		})
	}
}

// TestSKAEADIVsDiffer: two seals under one key use two IVs.
func TestSKAEADIVsDiffer(t *testing.T) {
	s := suite(t, message.ProtoIKE, "aes128gcm16-prfsha256-x25519")
	c, _ := NewSKCipher(s, make([]byte, 20), nil)
	h := message.HeaderFields{Exchange: message.Informational}
	a, _ := c.Seal(h, message.NoNext, nil)
	b, _ := c.Seal(h, message.NoNext, nil)
	ivOff := message.HeaderLen + message.PayloadHeaderLen
	if bytes.Equal(a[ivOff:ivOff+8], b[ivOff:ivOff+8]) {
		t.Fatalf("IV %x used twice", a[ivOff:ivOff+8])
	}
}

// FuzzSKOpen: a message from the network, parsed and opened with every
// suite, never panics.
func FuzzSKOpen(f *testing.F) {
	var ciphers []*SKCipher
	for _, name := range skSuites {
		p, _ := proposal.Parse(message.ProtoIKE, name)
		s, _ := proposal.Select([]proposal.Proposal{p}, []message.Proposal{p.Message(1, nil)}, false)
		k := DeriveIKE(s, []byte("skeyseed"), nil, nil, 1, 2)
		c, _ := NewSKCipher(s, k.EI, k.AI)
		if msg, err := c.Seal(message.HeaderFields{Exchange: message.IKEAuth}, message.TypeN, message.AppendNotify(nil, 0, message.InitialContact, nil, nil)); err == nil {
			f.Add(msg)
		}
		c, _ = NewSKCipher(s, k.EI, k.AI)
		ciphers = append(ciphers, c)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := message.Parse(b)
		if err != nil {
			return
		}
		for _, p := range m.Payloads {
			if p.Type != message.TypeSK {
				continue
			}
			for _, c := range ciphers {
				if plain, err := c.Open(b, p.Body); err == nil {
					message.ParsePayloads(p.Inner, plain)
				}
			}
		}
	})
}

// TestSKCipherClear: Clear zeroes the key bytes the cipher copied (the
// integrity key with CBC, the salt with an AEAD); a cleared cipher seals
// nothing and opens nothing, even what it sealed before.
func TestSKCipherClear(t *testing.T) {
	for _, name := range skSuites {
		t.Run(name, func(t *testing.T) {
			s := suite(t, message.ProtoIKE, name)
			k := DeriveIKE(s, []byte("skeyseed"), []byte("ni"), []byte("nr"), 1, 2)
			c, err := NewSKCipher(s, k.EI, k.AI)
			if err != nil {
				t.Fatal(err)
			}
			h := message.HeaderFields{ISPI: 1, RSPI: 2, Exchange: message.Informational, Flags: message.FlagInitiator, MessageID: 1}
			msg, err := c.Seal(h, message.NoNext, nil)
			if err != nil {
				t.Fatal(err)
			}
			macK, salt := c.macK, c.salt[:]
			c.Clear()
			for what, b := range map[string][]byte{"integrity key": macK, "salt": salt} {
				if !bytes.Equal(b, make([]byte, len(b))) {
					t.Errorf("the %s copy is not zeroed: %x", what, b)
				}
			}
			if _, err := c.Seal(h, message.NoNext, nil); !errors.Is(err, ErrCleared) {
				t.Errorf("Seal after Clear: %v, want ErrCleared", err)
			}
			m, _ := message.Parse(msg)
			if _, err := c.Open(msg, m.Get(message.TypeSK)); !errors.Is(err, ErrAuth) {
				t.Errorf("Open after Clear: %v, want ErrAuth", err)
			}
			c.Clear() // twice is fine
		})
	}
}
