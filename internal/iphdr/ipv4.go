package iphdr

import (
	"encoding/binary"
	"net/netip"
)

// IPv4 header (RFC 791 §3.1):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Version|  IHL  |Type of Service|          Total Length         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Identification        |Flags|      Fragment Offset    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Time to Live |    Protocol   |         Header Checksum       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       Source Address                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Destination Address                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Options                    |    Padding    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
const (
	v4VersionIHL = 0
	v4TotalLen   = 2
	v4ID         = 4
	v4FlagsFrag  = 6
	v4TTL        = 8
	v4Protocol   = 9
	v4Checksum   = 10
	v4Src        = 12
	v4Dst        = 16

	// The flags and fragment offset word: a datagram is a fragment when
	// More Fragments is set or the offset is non-zero. DF is not looked at.
	v4MoreFragments = 0x2000
	v4FragOffMask   = 0x1fff
)

const (
	// IPv4MinLen is the size of an IPv4 header without options.
	IPv4MinLen = 20
	// IPv4MaxLen is the size of an IPv4 header with the most options (IHL 15).
	IPv4MaxLen = 60
)

// IPv4 is an IPv4 packet, from the header on.
type IPv4 []byte

// IsValid reports whether b starts with a whole IPv4 header: version 4, an
// IHL of at least 5, and at least IHL*4 bytes. The total length is not
// checked against len(b) (TotalLen says it; a caller that needs them to
// agree compares them), nor the checksum.
func (b IPv4) IsValid() bool {
	if len(b) < IPv4MinLen || b[v4VersionIHL]>>4 != 4 {
		return false
	}
	hl := b.HeaderLen()
	return hl >= IPv4MinLen && hl <= len(b)
}

// HeaderLen returns the header's length in bytes, options included (IHL*4).
func (b IPv4) HeaderLen() int { return int(b[v4VersionIHL]&0x0f) * 4 }

// TotalLen returns the Total Length field: header and payload, in bytes.
func (b IPv4) TotalLen() int { return int(binary.BigEndian.Uint16(b[v4TotalLen:])) }

// ID returns the Identification field.
func (b IPv4) ID() uint16 { return binary.BigEndian.Uint16(b[v4ID:]) }

// IsFragment reports whether b is a fragment of a larger datagram (More
// Fragments set, or a non-zero offset), whose upper-layer header is then
// missing or incomplete.
func (b IPv4) IsFragment() bool {
	return binary.BigEndian.Uint16(b[v4FlagsFrag:])&(v4MoreFragments|v4FragOffMask) != 0
}

// Protocol returns the protocol number of the payload.
func (b IPv4) Protocol() uint8 { return b[v4Protocol] }

// Src returns the source address.
func (b IPv4) Src() netip.Addr { return netip.AddrFrom4([4]byte(b[v4Src:v4Dst])) }

// Dst returns the destination address.
func (b IPv4) Dst() netip.Addr { return netip.AddrFrom4([4]byte(b[v4Dst : v4Dst+4])) }

// Addrs returns the source and destination addresses as they are on the
// wire, 8 bytes: what the flow hash and the TCP/UDP pseudo-header read.
func (b IPv4) Addrs() []byte { return b[v4Src : v4Dst+4] }

// Payload returns what follows the header, to the end of b (not to
// TotalLen: a caller that trusts the length field slices further).
func (b IPv4) Payload() []byte { return b[b.HeaderLen():] }

// SetTotalLen sets the Total Length field.
func (b IPv4) SetTotalLen(n int) { binary.BigEndian.PutUint16(b[v4TotalLen:], uint16(n)) }

// SetID sets the Identification field.
func (b IPv4) SetID(id uint16) { binary.BigEndian.PutUint16(b[v4ID:], id) }

// UpdateChecksum computes the header checksum (RFC 791: the ones'
// complement of the ones' complement sum of the header's 16-bit words,
// options included) and writes it into the header.
func (b IPv4) UpdateChecksum() {
	b[v4Checksum], b[v4Checksum+1] = 0, 0
	binary.BigEndian.PutUint16(b[v4Checksum:], ^onesSum(b[:b.HeaderLen()]))
}

// ChecksumValid reports whether the header checksum is right: the ones'
// complement sum of the whole header, checksum included, is all ones.
func (b IPv4) ChecksumValid() bool { return onesSum(b[:b.HeaderLen()]) == 0xffff }

// Encode writes a 20-byte header into b[:IPv4MinLen] (no options, DF
// clear, id 0, TTL ttl, checksum computed) for a payload of payloadLen
// bytes from src to dst, both IPv4 addresses.
func (b IPv4) Encode(src, dst netip.Addr, proto, ttl uint8, payloadLen int) {
	_ = b[IPv4MinLen-1]
	b[v4VersionIHL] = 4<<4 | IPv4MinLen/4
	b[1] = 0 // type of service
	b.SetTotalLen(IPv4MinLen + payloadLen)
	binary.BigEndian.PutUint32(b[v4ID:], 0) // id, flags, fragment offset
	b[v4TTL] = ttl
	b[v4Protocol] = proto
	s, d := src.As4(), dst.As4()
	copy(b[v4Src:], s[:])
	copy(b[v4Dst:], d[:])
	b.UpdateChecksum()
}

// onesSum returns the 16-bit ones' complement sum of b (RFC 1071), b of
// even length.
func onesSum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return uint16(sum)
}
