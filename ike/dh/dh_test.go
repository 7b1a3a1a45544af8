package dh

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math/big"
	"testing"
)

func unhex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// TestVectors checks the KE data and shared secrets against published
// vectors: RFC 5903 §8.1 and §8.2 (ECP-256, ECP-384; the KE data is x ‖ y)
// and RFC 7748 §6.1 (X25519).
func TestVectors(t *testing.T) {
	for _, tt := range []struct {
		name            string
		group           uint16
		priv, pub, peer string
		shared          string
	}{
		{"ecp256 (RFC 5903 8.1)", ECP256,
			"C88F01F510D9AC3F70A292DAA2316DE544E9AAB8AFE84049C62A9C57862D1433",
			"DAD0B65394221CF9B051E1FECA5787D098DFE637FC90B9EF945D0C3772581180" + "5271A0461CDB8252D61F1C456FA3E59AB1F45B33ACCF5F58389E0577B8990BB3",
			"D12DFB5289C8D4F81208B70270398C342296970A0BCCB74C736FC7554494BF63" + "56FBF3CA366CC23E8157854C13C58D6AAC23F046ADA30F8353E74F33039872AB",
			"D6840F6B42F6EDAFD13116E0E12565202FEF8E9ECE7DCE03812464D04B9442DE"},
		{"ecp384 (RFC 5903 8.2)", ECP384,
			"099F3C7034D4A2C699884D73A375A67F7624EF7C6B3C0F160647B67414DCE655E35B538041E649EE3FAEF896783AB194",
			"",
			"E558DBEF53EECDE3D3FCCFC1AEA08A89A987475D12FD950D83CFA41732BC509D0D1AC43A0336DEF96FDA41D0774A3571" + "DCFBEC7AACF3196472169E838430367F66EEBE3C6E70C416DD5F0C68759DD1FFF83FA40142209DFF5EAAD96DB9E6386C",
			"11187331C279962D93D604243FD592CB9D0A926F422E47187521287E7156C5C4D603135569B9E9D09CF5D4A270F59746"},
		{"x25519 (RFC 7748 6.1)", X25519,
			"77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a",
			"8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a",
			"de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f",
			"4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := FromPrivate(tt.group, unhex(tt.priv))
			if err != nil {
				t.Fatal(err)
			}
			if tt.pub != "" && !bytes.Equal(p.Public(), unhex(tt.pub)) {
				t.Fatalf("public: got %x, want %s", p.Public(), tt.pub)
			}
			s, err := p.Shared(unhex(tt.peer))
			if err != nil || !bytes.Equal(s, unhex(tt.shared)) {
				t.Fatalf("shared: got %x, %v; want %s", s, err, tt.shared)
			}
		})
	}
}

// TestMODPPrimes checks the primes as typed: safe primes of the group's
// size whose top and bottom 64 bits are ones, as RFC 2409 and RFC 3526
// build them.
func TestMODPPrimes(t *testing.T) {
	ones := new(big.Int).SetUint64(^uint64(0))
	for group, bits := range map[uint16]int{MODP1024: 1024, MODP2048: 2048} {
		p := modpGroups[group].p
		q := new(big.Int).Rsh(p, 1)
		top := new(big.Int).Rsh(p, uint(bits-64))
		low := new(big.Int).And(p, ones)
		if p.BitLen() != bits || modpGroups[group].len*8 != bits || !p.ProbablyPrime(20) || !q.ProbablyPrime(20) || top.Cmp(ones) != 0 || low.Cmp(ones) != 0 {
			t.Errorf("group %d: the prime is not the %d-bit safe prime of the RFCs", group, bits)
		}
	}
}

func TestAgreement(t *testing.T) {
	for _, g := range []uint16{MODP1024, MODP2048, ECP256, ECP384, X25519} {
		a, err := New(g, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := New(g, nil)
		sa, err1 := a.Shared(b.Public())
		sb, err2 := b.Shared(a.Public())
		if err1 != nil || err2 != nil || !bytes.Equal(sa, sb) {
			t.Fatalf("group %d: secrets differ (%v, %v)", g, err1, err2)
		}
	}
}

// TestRefusesBadPublic: values that would force a known secret, points off
// the curve and wrong lengths are refused.
func TestRefusesBadPublic(t *testing.T) {
	p256 := unhex("D12DFB5289C8D4F81208B70270398C342296970A0BCCB74C736FC7554494BF63" + "56FBF3CA366CC23E8157854C13C58D6AAC23F046ADA30F8353E74F33039872AB")
	offCurve := bytes.Clone(p256)
	offCurve[63] ^= 1
	pm1 := new(big.Int).Sub(modp2048P, big.NewInt(1)).FillBytes(make([]byte, 256))
	one := big.NewInt(1).FillBytes(make([]byte, 256))
	for _, tt := range []struct {
		name  string
		group uint16
		peer  []byte
	}{
		{"modp y=1", MODP2048, one},
		{"modp y=p-1", MODP2048, pm1},
		{"modp y=p", MODP2048, modp2048P.FillBytes(make([]byte, 256))},
		{"modp short", MODP2048, one[1:]},
		{"modp1024 y=p-1", MODP1024, new(big.Int).Sub(modpGroups[MODP1024].p, big.NewInt(1)).FillBytes(make([]byte, 128))},
		{"modp1024 with a modp2048 length", MODP1024, one},
		{"ecp256 off curve", ECP256, offCurve},
		{"ecp256 short", ECP256, p256[:63]},
		{"x25519 zero (low order)", X25519, make([]byte, 32)},
		{"x25519 short", X25519, make([]byte, 31)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := New(tt.group, nil)
			if s, err := p.Shared(tt.peer); !errors.Is(err, ErrBadPublic) {
				t.Fatalf("got %x, %v; want ErrBadPublic", s, err)
			}
		})
	}
}

// TestClear: a cleared private key has its MODP exponent's words zeroed
// and computes no shared secret any more, in every group.
func TestClear(t *testing.T) {
	for _, g := range []uint16{MODP1024, MODP2048, ECP256, ECP384, X25519} {
		p, err := New(g, nil)
		if err != nil {
			t.Fatal(err)
		}
		q, _ := New(g, nil)
		if _, err := p.Shared(q.Public()); err != nil {
			t.Fatal(err)
		}
		var words []big.Word
		if p.x != nil {
			words = p.x.Bits()
		}
		p.Clear()
		for i, w := range words {
			if w != 0 {
				t.Fatalf("group %d: word %d of the exponent not zeroed", g, i)
			}
		}
		if _, err := p.Shared(q.Public()); !errors.Is(err, ErrCleared) {
			t.Fatalf("group %d: Shared after Clear: %v, want ErrCleared", g, err)
		}
	}
	var none *Private
	none.Clear()
}
