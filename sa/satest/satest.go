// Package satest holds helpers for tests of the packages that use package
// sa: the table of cipher suites every round-trip test runs against,
// cleartext inner packets, and sealing one packet. (Package sa's own tests
// keep theirs: they cannot import this package.)
package satest

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/ipsecd/ipsecd/sa"
)

// Suite is one ESP transform of the shared test table.
type Suite struct {
	// Name is the tests' name of the suite: "aes-gcm-128".
	Name string
	// KeyLen is the key material the suite takes: for an AEAD its key
	// and salt, for a cipher with HMAC the cipher key followed by the
	// 32-byte HMAC key.
	KeyLen int
	// Algorithms returns the suite's algorithms keyed with key (KeyLen
	// bytes): an AEAD, or a cipher and an authentication algorithm.
	Algorithms func(key []byte) (aead, enc, auth *sa.Algorithm)
}

func gcm(keyLen, icvBits int) func([]byte) (aead, enc, auth *sa.Algorithm) {
	return func(k []byte) (aead, enc, auth *sa.Algorithm) {
		return &sa.Algorithm{Name: sa.AlgGCM, Key: k[:keyLen], Bits: icvBits}, nil, nil
	}
}

// Suites are every algorithm family the daemon supports, with a full ICV
// (docs/config.md, states[]).
var Suites = []Suite{
	{"aes-gcm-128", 16 + 4, gcm(16+4, 128)},
	{"aes-gcm-256", 32 + 4, gcm(32+4, 128)},
	{"chacha20-poly1305", 32 + 4, func(k []byte) (aead, enc, auth *sa.Algorithm) {
		return &sa.Algorithm{Name: sa.AlgChaCha, Key: k[:36], Bits: 128}, nil, nil
	}},
	{"aes-cbc-hmac-sha256", 16 + 32, func(k []byte) (aead, enc, auth *sa.Algorithm) {
		return nil, &sa.Algorithm{Name: sa.AlgCBC, Key: k[:16]}, &sa.Algorithm{Name: sa.AlgHMACSHA2, Key: k[16:48], Bits: 128}
	}},
	{"null-hmac-sha256", 32, func(k []byte) (aead, enc, auth *sa.Algorithm) {
		return nil, &sa.Algorithm{Name: sa.AlgNull}, &sa.Algorithm{Name: sa.AlgHMACSHA2, Key: k[:32], Bits: 128}
	}},
}

// TruncatedGCM are AES-GCM-128 with a truncated ICV (RFC 4106 §8), kept
// out of Suites for the tests that run every suite at length.
var TruncatedGCM = []Suite{
	{"aes-gcm-128-icv64", 16 + 4, gcm(16+4, 64)},
	{"aes-gcm-128-icv96", 16 + 4, gcm(16+4, 96)},
}

// IPv4UDP returns an IPv4 UDP packet of size bytes (at least 28) from src
// to dst, TTL 64, with a valid header checksum, no UDP checksum and a
// payload of counting bytes.
func IPv4UDP(src, dst netip.Addr, size int) []byte {
	p := make([]byte, size)
	p[0], p[8], p[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(p[2:], uint16(size))
	copy(p[12:16], src.AsSlice())
	copy(p[16:20], dst.AsSlice())
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(p[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(p[10:], ^uint16(sum))
	binary.BigEndian.PutUint16(p[20:], 4500) // source port
	binary.BigEndian.PutUint16(p[22:], 4501) // destination port
	binary.BigEndian.PutUint16(p[24:], uint16(size-20))
	for i := 28; i < size; i++ {
		p[i] = byte(i)
	}
	return p
}

// NewPacket returns a Packet of data in a fresh buffer with sa.Headroom
// before it and sa.Tailroom after it, as the data path reads packets, so
// that it can be sealed or opened in place.
func NewPacket(data []byte) sa.Packet {
	buf := make([]byte, sa.Headroom+len(data)+sa.Tailroom)
	copy(buf[sa.Headroom:], data)
	return sa.Packet{Buf: buf, Off: sa.Headroom, Len: len(data)}
}

// Seal seals inner with the outbound SA s and returns the ESP packet, SPI
// to ICV, in a buffer of its own. The test fails if s drops it.
func Seal(t testing.TB, s *sa.SA, inner []byte) []byte {
	t.Helper()
	ps := []sa.Packet{NewPacket(inner)}
	s.SealBatch(ps)
	if ps[0].Drop != sa.CounterNone {
		t.Fatalf("seal with %v: dropped as %v", s, ps[0].Drop)
	}
	return append([]byte(nil), ps[0].Data()...)
}
