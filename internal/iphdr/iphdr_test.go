package iphdr

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"testing"
)

var (
	src4 = netip.MustParseAddr("192.0.2.1")
	dst4 = netip.MustParseAddr("198.51.100.2")
	src6 = netip.MustParseAddr("2001:db8::1")
	dst6 = netip.MustParseAddr("2001:db8:1::2")
)

// v4 is an IPv4 header of ihl words (options zero) with protocol proto,
// followed by payload, its total length right.
func v4(ihl int, proto uint8, payload []byte) []byte {
	b := make([]byte, ihl*4+len(payload))
	b[0] = 0x40 | byte(ihl)
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	binary.BigEndian.PutUint16(b[4:], 0xbeef)
	b[8], b[9] = 64, proto
	copy(b[12:], src4.AsSlice())
	copy(b[16:], dst4.AsSlice())
	copy(b[ihl*4:], payload)
	return b
}

// v6 is an IPv6 header with next header nh, followed by payload, its
// payload length right.
func v6(nh uint8, payload []byte) []byte {
	b := make([]byte, IPv6Len+len(payload))
	b[0] = 0x60
	binary.BigEndian.PutUint16(b[4:], uint16(len(payload)))
	b[6], b[7] = nh, 64
	copy(b[8:], src6.AsSlice())
	copy(b[24:], dst6.AsSlice())
	copy(b[IPv6Len:], payload)
	return b
}

// with returns a copy of b with b[at:] overwritten by v.
func with(b []byte, at int, v ...byte) []byte {
	b = bytes.Clone(b)
	copy(b[at:], v)
	return b
}

func TestVersion(t *testing.T) {
	for _, tt := range []struct {
		name string
		b    []byte
		want int
	}{
		{"empty", nil, 0},
		{"IPv4", []byte{0x45}, 4},
		{"IPv6", []byte{0x60, 0, 0, 0}, 6},
		{"zero nibble", []byte{0x0f}, 0},
		{"version 15", []byte{0xf0}, 15},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Version(tt.b); got != tt.want {
				t.Errorf("Version(% x) = %d, want %d", tt.b, got, tt.want)
			}
		})
	}
}

func TestIPv4IsValid(t *testing.T) {
	pkt := v4(5, ProtocolUDP, make([]byte, 8))
	for _, tt := range []struct {
		name string
		b    []byte
		want bool
	}{
		{"plain header", pkt, true},
		{"header only", pkt[:20], true},
		{"with options", v4(6, ProtocolUDP, nil), true},
		{"largest header", v4(15, ProtocolUDP, nil), true},
		{"largest header cut short", v4(15, ProtocolUDP, nil)[:59], false},
		{"IHL below 5", with(pkt, 0, 0x44), false},
		{"IHL 0", with(pkt, 0, 0x40), false},
		{"version 6", with(pkt, 0, 0x65), false},
		{"truncated", pkt[:19], false},
		{"empty", nil, false},
		// The total length is the caller's to compare: it may disagree.
		{"total length longer than the packet", with(pkt, 2, 0xff, 0xff), true},
		{"total length shorter than the header", with(pkt, 2, 0, 4), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := IPv4(tt.b).IsValid(); got != tt.want {
				t.Errorf("IsValid(% x) = %v, want %v", tt.b, got, tt.want)
			}
		})
	}
}

func TestIPv4Fields(t *testing.T) {
	payload := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	h := IPv4(v4(6, ProtocolTCP, payload))
	if got, want := h.HeaderLen(), 24; got != want {
		t.Errorf("HeaderLen = %d, want %d", got, want)
	}
	if got, want := h.TotalLen(), 32; got != want {
		t.Errorf("TotalLen = %d, want %d", got, want)
	}
	if got, want := h.ID(), uint16(0xbeef); got != want {
		t.Errorf("ID = %#x, want %#x", got, want)
	}
	if got := h.Protocol(); got != ProtocolTCP {
		t.Errorf("Protocol = %d, want %d", got, ProtocolTCP)
	}
	if h.Src() != src4 || h.Dst() != dst4 {
		t.Errorf("Src, Dst = %v, %v, want %v, %v", h.Src(), h.Dst(), src4, dst4)
	}
	if want := append(src4.AsSlice(), dst4.AsSlice()...); !bytes.Equal(h.Addrs(), want) {
		t.Errorf("Addrs = % x, want % x", h.Addrs(), want)
	}
	if !bytes.Equal(h.Payload(), payload) {
		t.Errorf("Payload = % x, want % x", h.Payload(), payload)
	}
	h.SetTotalLen(1500)
	h.SetID(7)
	if h.TotalLen() != 1500 || h.ID() != 7 {
		t.Errorf("after SetTotalLen(1500), SetID(7): %d, %d", h.TotalLen(), h.ID())
	}
}

func TestIPv4IsFragment(t *testing.T) {
	for _, tt := range []struct {
		name  string
		flags uint16 // the flags and fragment offset word
		want  bool
	}{
		{"whole datagram", 0, false},
		{"don't fragment", 0x4000, false},
		{"first fragment (more fragments)", 0x2000, true},
		{"middle fragment", 0x2000 | 185, true},
		{"last fragment (offset only)", 185, true},
		{"largest offset", 0x1fff, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := IPv4(v4(5, ProtocolUDP, nil))
			binary.BigEndian.PutUint16(h[6:], tt.flags)
			if got := h.IsFragment(); got != tt.want {
				t.Errorf("IsFragment with %#04x = %v, want %v", tt.flags, got, tt.want)
			}
		})
	}
}

// TestIPv4Checksum uses the example header of Wikipedia's "Internet
// checksum" article (and of many textbooks), checksum 0xb861.
func TestIPv4Checksum(t *testing.T) {
	h, _ := hex.DecodeString("450000730000400040110000c0a80001c0a800c7")
	IPv4(h).UpdateChecksum()
	if got := binary.BigEndian.Uint16(h[10:]); got != 0xb861 {
		t.Errorf("checksum = %#04x, want 0xb861", got)
	}
	if !IPv4(h).ChecksumValid() {
		t.Error("ChecksumValid = false on a header just checksummed")
	}
	h[8]-- // the TTL a router would decrement, without updating the sum
	if IPv4(h).ChecksumValid() {
		t.Error("ChecksumValid = true after the TTL changed")
	}
}

func TestIPv4Encode(t *testing.T) {
	b := bytes.Repeat([]byte{0xaa}, IPv4MinLen+100)
	h := IPv4(b)
	h.Encode(src4, dst4, ProtocolUDP, 64, 100)
	if !h.IsValid() || h.HeaderLen() != IPv4MinLen || h.TotalLen() != len(b) ||
		h.Protocol() != ProtocolUDP || h.IsFragment() || h.ID() != 0 || b[8] != 64 || b[1] != 0 {
		t.Errorf("Encode wrote % x", b[:IPv4MinLen])
	}
	if h.Src() != src4 || h.Dst() != dst4 {
		t.Errorf("Encode wrote %v -> %v, want %v -> %v", h.Src(), h.Dst(), src4, dst4)
	}
	if !h.ChecksumValid() {
		t.Errorf("Encode wrote a bad checksum: % x", b[:IPv4MinLen])
	}
	if b[IPv4MinLen] != 0xaa {
		t.Error("Encode wrote past the header")
	}
}

func TestIPv6(t *testing.T) {
	payload := []byte{9, 8, 7, 6, 5, 4, 3, 2}
	pkt := v6(ProtocolUDP, payload)
	for _, tt := range []struct {
		name string
		b    []byte
		want bool
	}{
		{"header and payload", pkt, true},
		{"header only", pkt[:IPv6Len], true},
		{"truncated", pkt[:IPv6Len-1], false},
		{"empty", nil, false},
		{"version 4", with(pkt, 0, 0x45), false},
		// The payload length is the caller's to compare: it may disagree.
		{"payload length longer than the packet", with(pkt, 4, 0xff, 0xff), true},
		{"jumbogram (payload length 0)", with(pkt, 4, 0, 0), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := IPv6(tt.b).IsValid(); got != tt.want {
				t.Errorf("IsValid(% x) = %v, want %v", tt.b, got, tt.want)
			}
		})
	}
	h := IPv6(pkt)
	if h.PayloadLen() != len(payload) || h.NextHeader() != ProtocolUDP {
		t.Errorf("PayloadLen, NextHeader = %d, %d, want %d, %d", h.PayloadLen(), h.NextHeader(), len(payload), ProtocolUDP)
	}
	if h.Src() != src6 || h.Dst() != dst6 {
		t.Errorf("Src, Dst = %v, %v, want %v, %v", h.Src(), h.Dst(), src6, dst6)
	}
	if want := append(src6.AsSlice(), dst6.AsSlice()...); !bytes.Equal(h.Addrs(), want) {
		t.Errorf("Addrs = % x, want % x", h.Addrs(), want)
	}
	if !bytes.Equal(h.Payload(), payload) {
		t.Errorf("Payload = % x, want % x", h.Payload(), payload)
	}
}

func TestIPv6Encode(t *testing.T) {
	b := bytes.Repeat([]byte{0xaa}, IPv6Len+1)
	h := IPv6(b)
	h.Encode(src6, dst6, ProtocolTCP, 64, 1200)
	want := v6(ProtocolTCP, nil)
	binary.BigEndian.PutUint16(want[4:], 1200)
	if !bytes.Equal(b[:IPv6Len], want) {
		t.Errorf("Encode wrote\n% x, want\n% x", b[:IPv6Len], want)
	}
	if b[IPv6Len] != 0xaa {
		t.Error("Encode wrote past the header")
	}
}

// ext is an extension header of 8*(units+1) bytes whose next header is nh.
func ext(nh uint8, units int) []byte {
	h := make([]byte, 8*(units+1))
	h[0], h[1] = nh, byte(units)
	return h
}

func TestSkipExtension(t *testing.T) {
	tail := []byte{0xde, 0xad}
	for _, tt := range []struct {
		name     string
		proto    uint8
		b        []byte
		wantNext uint8
		wantRest []byte // nil: not ok
	}{
		{"destination options, 8 bytes", IPv6DestOpts, append(ext(ProtocolTCP, 0), tail...), ProtocolTCP, tail},
		{"destination options, 24 bytes", IPv6DestOpts, append(ext(ProtocolUDP, 2), tail...), ProtocolUDP, tail},
		{"destination options, nothing behind", IPv6DestOpts, ext(59, 0), 59, []byte{}},
		{"hop-by-hop", IPv6HopByHop, append(ext(IPv6DestOpts, 1), tail...), IPv6DestOpts, tail},
		{"routing", IPv6Routing, append(ext(ProtocolUDP, 2), tail...), ProtocolUDP, tail},
		{"fragment (length field reserved)", IPv6Fragment, append(with(ext(ProtocolUDP, 0), 1, 0xff), tail...), ProtocolUDP, tail},
		{"length past the end", IPv6DestOpts, ext(ProtocolUDP, 3)[:24], 0, nil},
		{"shorter than 8 bytes", IPv6DestOpts, []byte{ProtocolUDP, 0, 1, 2}, 0, nil},
		{"fragment shorter than 8 bytes", IPv6Fragment, []byte{ProtocolUDP, 0, 0, 0, 0, 0, 0}, 0, nil},
		{"empty", IPv6HopByHop, nil, 0, nil},
		{"not an extension header", ProtocolTCP, ext(0, 0), 0, nil},
		{"ESP is not walked", 50, ext(0, 0), 0, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			next, rest, ok := SkipExtension(tt.proto, tt.b)
			if ok != (tt.wantRest != nil) || next != tt.wantNext || !bytes.Equal(rest, tt.wantRest) {
				t.Errorf("SkipExtension(%d, % x) = %d, % x, %v; want %d, % x, %v",
					tt.proto, tt.b, next, rest, ok, tt.wantNext, tt.wantRest, tt.wantRest != nil)
			}
		})
	}
}

func TestPorts(t *testing.T) {
	src, dst, ok := Ports([]byte{0x11, 0x94, 0x00, 0x35, 0xff})
	if !ok || src != 4500 || dst != 53 {
		t.Errorf("Ports = %d, %d, %v; want 4500, 53, true", src, dst, ok)
	}
	if _, _, ok := Ports([]byte{0x11, 0x94, 0x00}); ok {
		t.Error("Ports of 3 bytes: ok")
	}
}

func TestUDP(t *testing.T) {
	u := UDP([]byte{0x11, 0x94, 0x11, 0x94, 0x00, 0x0a, 0, 0, 1, 2})
	if !u.IsValid() || u.Length() != 10 {
		t.Errorf("IsValid, Length = %v, %d; want true, 10", u.IsValid(), u.Length())
	}
	if UDP(u[:7]).IsValid() {
		t.Error("7-byte UDP header is valid")
	}
}

// tcp is a TCP header of words 32-bit words (data offset words) followed
// by n bytes.
func tcp(words, n int) []byte {
	b := make([]byte, max(words*4, TCPMinLen)+n)
	b[12] = byte(words << 4)
	return b
}

func TestTCP(t *testing.T) {
	for _, tt := range []struct {
		name string
		b    []byte
		want bool
	}{
		{"plain header", tcp(5, 0), true},
		{"with data", tcp(5, 100), true},
		{"largest header", tcp(15, 0), true},
		{"data offset past the segment", tcp(15, 0)[:40], false},
		{"data offset under 5 words", tcp(4, 10), false},
		{"truncated", tcp(5, 0)[:19], false},
		{"empty", nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := TCP(tt.b).IsValid(); got != tt.want {
				t.Errorf("IsValid(% x) = %v, want %v", tt.b, got, tt.want)
			}
		})
	}
	s := TCP(tcp(8, 10))
	s[13] = TCPFlagFin | TCPFlagPsh | 0x10 // FIN PSH ACK
	s.SetSeq(0x01020304)
	if s.HeaderLen() != 32 || s.Seq() != 0x01020304 || s.Flags() != 0x19 {
		t.Errorf("HeaderLen, Seq, Flags = %d, %#x, %#x", s.HeaderLen(), s.Seq(), s.Flags())
	}
	s.SetFlags(s.Flags() &^ TCPFlagFin)
	s.SetChecksum(0xabcd)
	if s.Flags() != 0x18 || binary.BigEndian.Uint16(s[16:]) != 0xabcd {
		t.Errorf("after SetFlags, SetChecksum: % x", s[:20])
	}
}

// TestAllocs: the readers and writers allocate nothing.
func TestAllocs(t *testing.T) {
	p4 := v4(5, ProtocolTCP, tcp(5, 100))
	p6 := v6(IPv6DestOpts, append(ext(ProtocolUDP, 0), 0, 1, 2, 3, 0, 12, 0, 0, 0, 0, 0, 0))
	out := make([]byte, IPv6Len)
	n := testing.AllocsPerRun(100, func() {
		h4, h6 := IPv4(p4), IPv6(p6)
		if !h4.IsValid() || !h6.IsValid() || h4.IsFragment() || !TCP(h4.Payload()).IsValid() {
			t.Fatal("refused")
		}
		_, _ = h4.Src(), h6.Dst()
		_, rest, ok := SkipExtension(h6.NextHeader(), h6.Payload())
		if _, _, pok := Ports(rest); !ok || !pok {
			t.Fatal("refused")
		}
		h4.UpdateChecksum()
		IPv6(out).Encode(src6, dst6, ProtocolUDP, 64, 20)
	})
	if n != 0 {
		t.Errorf("allocs = %v, want 0", n)
	}
}
