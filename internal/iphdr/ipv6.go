package iphdr

import (
	"encoding/binary"
	"net/netip"
)

// IPv6 header (RFC 8200 §3):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Version| Traffic Class |           Flow Label                  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Payload Length        |  Next Header  |   Hop Limit   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |
//	+                         Source Address (16)                   +
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |
//	+                      Destination Address (16)                 +
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
const (
	v6PayloadLen = 4
	v6NextHeader = 6
	v6HopLimit   = 7
	v6Src        = 8
	v6Dst        = 24
)

// IPv6Len is the size of the IPv6 header (extension headers follow it).
const IPv6Len = 40

// IPv6 is an IPv6 packet, from the fixed header on.
type IPv6 []byte

// IsValid reports whether b starts with a whole IPv6 header: version 6 and
// at least IPv6Len bytes. The payload length is not checked against len(b)
// (PayloadLen says it; a caller that needs them to agree compares them).
func (b IPv6) IsValid() bool { return len(b) >= IPv6Len && b[0]>>4 == 6 }

// PayloadLen returns the Payload Length field: the bytes after the fixed
// header, extension headers included (0 for a jumbogram, RFC 2675).
func (b IPv6) PayloadLen() int { return int(binary.BigEndian.Uint16(b[v6PayloadLen:])) }

// NextHeader returns the Next Header field: the first extension header or
// the upper-layer protocol.
func (b IPv6) NextHeader() uint8 { return b[v6NextHeader] }

// Src returns the source address.
func (b IPv6) Src() netip.Addr { return netip.AddrFrom16([16]byte(b[v6Src:v6Dst])) }

// Dst returns the destination address.
func (b IPv6) Dst() netip.Addr { return netip.AddrFrom16([16]byte(b[v6Dst:IPv6Len])) }

// Addrs returns the source and destination addresses as they are on the
// wire, 32 bytes: what the flow hash and the TCP/UDP pseudo-header read.
func (b IPv6) Addrs() []byte { return b[v6Src:IPv6Len] }

// Payload returns what follows the fixed header, to the end of b.
func (b IPv6) Payload() []byte { return b[IPv6Len:] }

// SetPayloadLen sets the Payload Length field.
func (b IPv6) SetPayloadLen(n int) { binary.BigEndian.PutUint16(b[v6PayloadLen:], uint16(n)) }

// Encode writes a 40-byte header into b[:IPv6Len] (traffic class and flow
// label 0, hop limit ttl) for a payload of payloadLen bytes from src to
// dst, both IPv6 addresses.
func (b IPv6) Encode(src, dst netip.Addr, proto, ttl uint8, payloadLen int) {
	_ = b[IPv6Len-1]
	binary.BigEndian.PutUint32(b, 6<<28)
	b.SetPayloadLen(payloadLen)
	b[v6NextHeader] = proto
	b[v6HopLimit] = ttl
	s, d := src.As16(), dst.As16()
	copy(b[v6Src:], s[:])
	copy(b[v6Dst:], d[:])
}

// An IPv6 extension header (RFC 8200 §4): every one this package walks
// starts with the next header and, except the fragment header, its length
// in 8-octet units not counting the first 8.
//
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Next Header  |  Hdr Ext Len  |                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+                               +
//	.                    (type-specific data)                       .
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
const (
	extNextHeader = 0
	extLen        = 1

	// IPv6ExtMinLen is the smallest extension header, and the unit its
	// length is counted in.
	IPv6ExtMinLen = 8
)

// SkipExtension skips the extension header of kind proto (hop-by-hop,
// routing, fragment or destination options) at the start of b, and returns
// the next header it names and what follows it. ok is false when b is
// shorter than the header says, or proto is not one of those kinds. It does
// not look inside the header; a caller decides which kinds it walks through.
func SkipExtension(proto uint8, b []byte) (next uint8, rest []byte, ok bool) {
	if len(b) < IPv6ExtMinLen {
		return 0, nil, false
	}
	n := IPv6ExtMinLen // the fragment header: its length field is reserved
	switch proto {
	case IPv6HopByHop, IPv6Routing, IPv6DestOpts:
		n = (int(b[extLen]) + 1) * IPv6ExtMinLen
		if n > len(b) {
			return 0, nil, false
		}
	case IPv6Fragment:
	default:
		return 0, nil, false
	}
	return b[extNextHeader], b[n:], true
}
