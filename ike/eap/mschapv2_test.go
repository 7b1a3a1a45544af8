package eap

import (
	"encoding/hex"
	"strings"
	"testing"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRFC2759Vectors: RFC 2759 §9.2's example, step by step (user
// "User", password "clientPass").
func TestRFC2759Vectors(t *testing.T) {
	server := unhex(t, "5B 5D 7C 7D 7B 3F 2F 3E 3C 2C 60 21 32 26 26 28")
	peer := unhex(t, "21 40 23 24 25 5E 26 2A 28 29 5F 2B 3A 33 7C 7E")
	ch := challengeHash(peer, server, "User")
	if got := hex.EncodeToString(ch[:]); got != "d02e4386bce91226" {
		t.Errorf("ChallengeHash = %s, want d02e4386bce91226", got)
	}
	pw := ntPasswordHash([]byte("clientPass"))
	if got := hex.EncodeToString(pw[:]); got != "44ebba8d5312b8d611474411f56989ae" {
		t.Errorf("PasswordHash = %s, want 44ebba8d5312b8d611474411f56989ae", got)
	}
	hh := hashNTPasswordHash(pw)
	if got := hex.EncodeToString(hh[:]); got != "41c00c584bd2d91c4017a2a12fa59f3f" {
		t.Errorf("PasswordHashHash = %s, want 41c00c584bd2d91c4017a2a12fa59f3f", got)
	}
	nt := challengeResponse(ch, pw)
	if got := hex.EncodeToString(nt[:]); got != "82309ecd8d708b5ea08faa3981cd83544233114a3d85d6df" {
		t.Errorf("NT-Response = %s, want 82309ecd8d708b5ea08faa3981cd83544233114a3d85d6df", got)
	}
	if got := authResponseString(authenticatorResponse(hh, nt[:], ch)); got != "S=407A5589115FD0D6209F510FE9C04566932CDA56" {
		t.Errorf("AuthenticatorResponse = %s, want S=407A5589115FD0D6209F510FE9C04566932CDA56", got)
	}
	// derive does the same in one call, from the password hash, and
	// zeroes it.
	m := derive(&pw, server, peer, `DOMAIN\User`)
	if hex.EncodeToString(m.ntResponse[:]) != "82309ecd8d708b5ea08faa3981cd83544233114a3d85d6df" || pw != [16]byte{} {
		t.Errorf("derive: NT-Response %x, password hash left %x", m.ntResponse, pw)
	}
}

// TestRFC3079Vectors: RFC 3079 §3.5.3's 128-bit keys from the same
// exchange. Its SendStartKey128 is the server's send key (magic 3, "on
// the server side, it is the send key"), the second 16 bytes of
// strongSwan's MSK; the first 16 are the same computation with magic 2,
// then come 32 zero bytes.
func TestRFC3079Vectors(t *testing.T) {
	pw := ntPasswordHash([]byte("clientPass"))
	hh := hashNTPasswordHash(pw)
	nt := unhex(t, "82309ECD8D708B5EA08FAA3981CD83544233114A3D85D6DF")
	k := msk(hh, nt)
	if len(k) != MSKLen {
		t.Fatalf("MSK of %d bytes, want %d", len(k), MSKLen)
	}
	if got := hex.EncodeToString(k[16:32]); got != "8b7cdc149b993a1ba118cb153f56dccb" {
		t.Errorf("server send key (MSK[16:32]) = %s, want 8b7cdc149b993a1ba118cb153f56dccb", got)
	}
	if got := hex.EncodeToString(k[:16]); got != "d5f0e9521e3ea9589645e86051c82226" {
		t.Errorf("server receive key (MSK[:16]) = %s, want d5f0e9521e3ea9589645e86051c82226", got)
	}
	if got := hex.EncodeToString(k[32:]); got != strings.Repeat("0", 64) {
		t.Errorf("MSK[32:] = %s, want zeros", got)
	}
}

func TestDESKey(t *testing.T) {
	// 56 bits of ones become eight bytes of 0xfe (parity bits left 0).
	if got := desKey(unhex(t, "ffffffffffffff")); got != [8]byte{0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe} {
		t.Errorf("got %x", got)
	}
	if got := desKey(unhex(t, "80000000000001")); got != [8]byte{0x80, 0, 0, 0, 0, 0, 0, 0x02} {
		t.Errorf("got %x", got)
	}
}

func TestNTHashUTF16(t *testing.T) {
	// Non-ASCII: proper UTF-16 (what Windows hashes), not strongSwan's
	// byte-and-zero; the two agree on ASCII.
	a := ntPasswordHash([]byte("pässword"))
	b := ntPasswordHash([]byte("p\xe4ssword")) // Latin-1, not UTF-8: byte by byte
	if a != b {
		t.Errorf("ä as UTF-8 and as Latin-1 byte hash differently: %x %x", a, b)
	}
}
