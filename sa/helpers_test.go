package sa

import (
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/internal/iphdr"
)

func unhex(s string) []byte {
	s = strings.Map(func(r rune) rune {
		if strings.ContainsRune(" \n\t", r) {
			return -1
		}
		return r
	}, s)
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func seqKey(n int, seed byte) []byte {
	k := make([]byte, n)
	for i := range k {
		k[i] = seed + byte(i)
	}
	return k
}

// suites is the shared list every round-trip test runs against.
var suites = []struct {
	name string
	set  func(c *Config)
}{
	{"aes128gcm16", func(c *Config) { c.AEAD = &Algorithm{Name: AlgGCM, Key: seqKey(20, 1), Bits: 128} }},
	{"aes256gcm16", func(c *Config) { c.AEAD = &Algorithm{Name: AlgGCM, Key: seqKey(36, 2)} }},
	{"aes128gcm12", func(c *Config) { c.AEAD = &Algorithm{Name: AlgGCM, Key: seqKey(20, 3), Bits: 96} }},
	{"aes128gcm8", func(c *Config) { c.AEAD = &Algorithm{Name: AlgGCM, Key: seqKey(20, 4), Bits: 64} }},
	{"chacha20poly1305", func(c *Config) { c.AEAD = &Algorithm{Name: AlgChaCha, Key: seqKey(36, 5)} }},
	{"aes128cbc-sha256", func(c *Config) {
		c.Enc = &Algorithm{Name: AlgCBC, Key: seqKey(16, 6)}
		c.Auth = &Algorithm{Name: AlgHMACSHA2, Key: seqKey(32, 7)}
	}},
	{"aes256cbc-sha256", func(c *Config) {
		c.Enc = &Algorithm{Name: AlgCBC, Key: seqKey(32, 8)}
		c.Auth = &Algorithm{Name: AlgHMACSHA2, Key: seqKey(32, 9), Bits: 128}
	}},
	{"null-sha256", func(c *Config) {
		c.Enc = &Algorithm{Name: AlgNull}
		c.Auth = &Algorithm{Name: AlgHMACSHA2, Key: seqKey(32, 10)}
	}},
	{"aes128cbc-sha1", func(c *Config) {
		c.Enc = &Algorithm{Name: AlgCBC, Key: seqKey(16, 11)}
		c.Auth = &Algorithm{Name: AlgHMACSHA1, Key: seqKey(20, 12)}
	}},
	{"aes192cbc-sha384", func(c *Config) {
		c.Enc = &Algorithm{Name: AlgCBC, Key: seqKey(24, 13)}
		c.Auth = &Algorithm{Name: AlgHMACSHA384, Key: seqKey(48, 14), Bits: 192}
	}},
	{"aes256cbc-sha512", func(c *Config) {
		c.Enc = &Algorithm{Name: AlgCBC, Key: seqKey(32, 15)}
		c.Auth = &Algorithm{Name: AlgHMACSHA512, Key: seqKey(64, 16)}
	}},
	{"null-sha1", func(c *Config) {
		c.Enc = &Algorithm{Name: AlgNull}
		c.Auth = &Algorithm{Name: AlgHMACSHA1, Key: seqKey(20, 17)}
	}},
}

var (
	outer4a = netip.MustParseAddr("198.51.100.1")
	outer4b = netip.MustParseAddr("198.51.100.2")
	outer6a = netip.MustParseAddr("2001:db8::1")
	outer6b = netip.MustParseAddr("2001:db8::2")
)

// pair returns an outbound SA from a to b and the matching inbound SA.
func pair(t testing.TB, mode Mode, v6, esn bool, window uint32, set func(*Config)) (out, in *SA) {
	t.Helper()
	a, b := outer4a, outer4b
	if v6 {
		a, b = outer6a, outer6b
	}
	c := Config{Src: a, Dst: b, SPI: 0x1001, Dir: DirOut, Mode: mode, IfID: 1, ESN: esn, ReplayWindow: window}
	set(&c)
	out, err := New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Dir = DirIn
	in, err = New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out, in
}

// ipv4Packet is an inner IPv4 UDP packet from 192.0.2.1 to 203.0.113.1
// with n bytes of payload.
func ipv4Packet(n int) []byte {
	p := make([]byte, 28+n)
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	p[8] = 64
	p[9] = 17
	copy(p[12:], []byte{192, 0, 2, 1})
	copy(p[16:], []byte{203, 0, 113, 1})
	iphdr.IPv4(p).UpdateChecksum()
	binary.BigEndian.PutUint16(p[24:], uint16(8+n))
	for i := 28; i < len(p); i++ {
		p[i] = byte(i)
	}
	return p
}

// ipv6Packet is an inner IPv6 UDP packet from 2001:db8:1::1 to
// 2001:db8:2::1 with n bytes of payload.
func ipv6Packet(n int) []byte {
	p := make([]byte, 48+n)
	p[0] = 0x60
	binary.BigEndian.PutUint16(p[4:], uint16(8+n))
	p[6] = 17
	p[7] = 64
	copy(p[8:], netip.MustParseAddr("2001:db8:1::1").AsSlice())
	copy(p[24:], netip.MustParseAddr("2001:db8:2::1").AsSlice())
	binary.BigEndian.PutUint16(p[44:], uint16(8+n))
	for i := 48; i < len(p); i++ {
		p[i] = byte(i)
	}
	return p
}

// mkPacket puts data into a fresh buffer with Headroom and Tailroom.
func mkPacket(data []byte) Packet {
	buf := make([]byte, Headroom+len(data)+Tailroom)
	copy(buf[Headroom:], data)
	return Packet{Buf: buf, Off: Headroom, Len: len(data)}
}

// reseat copies a packet's data into a fresh buffer at Headroom, as the
// underlay would hand it to Open.
func reseat(p Packet) Packet { return mkPacket(p.Data()) }

func sealOne(t testing.TB, s *SA, data []byte) Packet {
	t.Helper()
	ps := []Packet{mkPacket(data)}
	s.SealBatch(ps)
	if ps[0].Drop != CounterNone {
		t.Fatalf("seal: dropped as %v", ps[0].Drop)
	}
	return ps[0]
}

func openOne(s *SA, p Packet) Packet {
	ps := []Packet{reseat(p)}
	s.OpenBatch(ps)
	return ps[0]
}
