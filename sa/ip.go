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
	rebuiltTTL       = 64
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

// transportHeader returns the length of pkt's IP header (which transport
// mode strips) and the protocol it carries.
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
		if hl < ipv4MinHeaderLen || hl > len(pkt) {
			return 0, 0, false
		}
		return hl, pkt[9], true
	case 6:
		if len(pkt) < ipv6HeaderLen {
			return 0, 0, false
		}
		return ipv6HeaderLen, pkt[6], true
	}
	return 0, 0, false
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
