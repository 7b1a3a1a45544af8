package sa

import (
	"encoding/binary"
	"net/netip"

	"github.com/ipsecd/ipsecd/sa/esp"
)

// Inner IP headers: just what ESP needs, read and written in place.

const (
	ipv4MinHeaderLen = 20
	ipv6HeaderLen    = 40
	ipv6ExtMinLen    = 8 // an extension header's length is in units of 8 bytes
	rebuiltTTL       = 64

	// The flags and fragment offset word of an IPv4 header (RFC 791):
	// a datagram is a fragment when MF is set or the offset is non-zero.
	ipv4FlagMF      = 0x2000
	ipv4FragOffMask = 0x1fff

	// IPv6 extension headers transport mode looks at (RFC 8200 §4).
	ipv6HopByHop = 0
	ipv6Routing  = 43
	ipv6Fragment = 44
	ipv6DestOpts = 60

	// Upper layers whose length transport mode checks.
	protoTCP        = 6
	protoUDP        = 17
	tcpMinHeaderLen = 20
	udpHeaderLen    = 8
)

// tunnelNextHeader returns the ESP next header for a whole inner packet:
// 4 for IPv4, 41 for IPv6, false for anything else.
func tunnelNextHeader(pkt []byte) (uint8, bool) {
	if len(pkt) == 0 {
		return 0, false
	}
	switch pkt[0] >> 4 {
	case 4:
		if len(pkt) >= ipv4MinHeaderLen {
			return esp.NextHeaderIPv4, true
		}
	case 6:
		if len(pkt) >= ipv6HeaderLen {
			return esp.NextHeaderIPv6, true
		}
	}
	return 0, false
}

// transportHeader checks that pkt is a datagram transport mode can carry
// and returns the length of its IP header (which transport mode strips)
// and the protocol it carries, the ESP next header. See transportPayload
// for what the payload must be; the header must describe pkt exactly
// (IPv4: a valid IHL, a total length of len(pkt), no fragment; IPv6: a
// payload length of len(pkt)-40, so no jumbogram), by the rules of the
// package doc ("Modes").
func transportHeader(pkt []byte) (hdrLen int, proto uint8, ok bool) {
	if len(pkt) == 0 {
		return 0, 0, false
	}
	switch pkt[0] >> 4 {
	case 4:
		if len(pkt) < ipv4MinHeaderLen {
			return 0, 0, false
		}
		hl := int(pkt[0]&0x0f) * 4
		if hl < ipv4MinHeaderLen || hl > len(pkt) ||
			int(binary.BigEndian.Uint16(pkt[2:])) != len(pkt) ||
			binary.BigEndian.Uint16(pkt[6:])&(ipv4FlagMF|ipv4FragOffMask) != 0 {
			return 0, 0, false
		}
		if !transportPayload(false, pkt[9], pkt[hl:]) {
			return 0, 0, false
		}
		return hl, pkt[9], true
	case 6:
		if len(pkt) < ipv6HeaderLen ||
			int(binary.BigEndian.Uint16(pkt[4:])) != len(pkt)-ipv6HeaderLen {
			return 0, 0, false
		}
		if !transportPayload(true, pkt[6], pkt[ipv6HeaderLen:]) {
			return 0, 0, false
		}
		return ipv6HeaderLen, pkt[6], true
	}
	return 0, 0, false
}

// transportPayload reports whether payload, behind an IPv4 (v6 false) or
// IPv6 header with protocol proto, is something transport mode carries.
// Both directions use it: SealBatch on the payload it is about to seal,
// OpenBatch on the payload it is about to put behind a rebuilt header.
//
// IPv6 extension headers (RFC 8200 §4.1): ESP goes after the hop-by-hop,
// routing and fragment headers (RFC 4303 §3.1.1), which would have to
// stay in the outer header. The outer header here is not the inner one
// (the underlay builds it from the SA), so a packet with any of them is
// refused, and a payload that would put one behind the rebuilt header
// (where hop-by-hop is not allowed at all, and a fragment header would
// make the rebuilt datagram a fragment) is refused too. Destination
// options may go either side of ESP: they travel inside it, and the walk
// goes through them to check what follows.
//
// The upper layer's own length must agree with the payload's: a UDP
// header's length is the payload's length, a TCP header's data offset is
// inside it. A payload that fails this is the piece of a datagram (or
// garbage that authenticated), which the rebuilt header would misdescribe.
func transportPayload(v6 bool, proto uint8, payload []byte) bool {
	if v6 {
		for proto == ipv6DestOpts {
			if len(payload) < ipv6ExtMinLen {
				return false
			}
			n := (int(payload[1]) + 1) * 8
			if n > len(payload) {
				return false
			}
			proto, payload = payload[0], payload[n:]
		}
		switch proto {
		case ipv6HopByHop, ipv6Routing, ipv6Fragment:
			return false
		}
	}
	switch proto {
	case protoTCP:
		if len(payload) < tcpMinHeaderLen {
			return false
		}
		off := int(payload[12]>>4) * 4
		return off >= tcpMinHeaderLen && off <= len(payload)
	case protoUDP:
		return len(payload) >= udpHeaderLen && int(binary.BigEndian.Uint16(payload[4:])) == len(payload)
	}
	return true
}

// innerAddrs returns the source and destination of an IP packet.
func innerAddrs(pkt []byte) (src, dst netip.Addr, ok bool) {
	if len(pkt) == 0 {
		return src, dst, false
	}
	switch pkt[0] >> 4 {
	case 4:
		if len(pkt) < ipv4MinHeaderLen {
			return src, dst, false
		}
		return netip.AddrFrom4([4]byte(pkt[12:16])), netip.AddrFrom4([4]byte(pkt[16:20])), true
	case 6:
		if len(pkt) < ipv6HeaderLen {
			return src, dst, false
		}
		return netip.AddrFrom16([16]byte(pkt[8:24])), netip.AddrFrom16([16]byte(pkt[24:40])), true
	}
	return src, dst, false
}

// writeIPv4Header writes a 20-byte IPv4 header (no options, DF clear, id 0,
// TTL 64) for a payload of payloadLen bytes into h.
func writeIPv4Header(h []byte, src, dst netip.Addr, proto uint8, payloadLen int) {
	h[0] = 0x45
	h[1] = 0
	binary.BigEndian.PutUint16(h[2:], uint16(ipv4MinHeaderLen+payloadLen))
	binary.BigEndian.PutUint32(h[4:], 0) // id, flags, fragment offset
	h[8] = rebuiltTTL
	h[9] = proto
	h[10], h[11] = 0, 0
	s, d := src.As4(), dst.As4()
	copy(h[12:16], s[:])
	copy(h[16:20], d[:])
	binary.BigEndian.PutUint16(h[10:], ipv4Checksum(h[:ipv4MinHeaderLen]))
}

func ipv4Checksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

// writeIPv6Header writes a 40-byte IPv6 header (hop limit 64) into h.
func writeIPv6Header(h []byte, src, dst netip.Addr, proto uint8, payloadLen int) {
	binary.BigEndian.PutUint32(h[0:], 6<<28)
	binary.BigEndian.PutUint16(h[4:], uint16(payloadLen))
	h[6] = proto
	h[7] = rebuiltTTL
	s, d := src.As16(), dst.As16()
	copy(h[8:24], s[:])
	copy(h[24:40], d[:])
}
