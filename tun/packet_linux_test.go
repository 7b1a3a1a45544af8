package tun

import (
	"encoding/binary"
	"net/netip"
)

// Packet builders for tests: just enough IPv4, IPv6, UDP and TCP.

func checksum(sum uint32, b []byte) uint32 {
	for ; len(b) >= 2; b = b[2:] {
		sum += uint32(binary.BigEndian.Uint16(b))
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	return sum
}

func fold(sum uint32) uint16 {
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

func pseudoSum(src, dst netip.Addr, proto uint8, l int) uint32 {
	s := checksum(0, src.AsSlice())
	s = checksum(s, dst.AsSlice())
	return s + uint32(proto) + uint32(l)
}

// ipPacket wraps an L4 segment (checksum field at csumAt, zero) in an IPv4
// or IPv6 header and fills in both checksums.
func ipPacket(src, dst netip.Addr, proto uint8, l4 []byte, csumAt int) []byte {
	var ip []byte
	if src.Is4() {
		ip = make([]byte, 20, 20+len(l4))
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(20+len(l4)))
		ip[6] = 0x40 // DF
		ip[8] = 64
		ip[9] = proto
		copy(ip[12:], src.AsSlice())
		copy(ip[16:], dst.AsSlice())
		binary.BigEndian.PutUint16(ip[10:], fold(checksum(0, ip)))
	} else {
		ip = make([]byte, 40, 40+len(l4))
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(len(l4)))
		ip[6] = proto
		ip[7] = 64
		copy(ip[8:], src.AsSlice())
		copy(ip[24:], dst.AsSlice())
	}
	c := fold(checksum(pseudoSum(src, dst, proto, len(l4)), l4))
	if proto == 17 && c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(l4[csumAt:], c)
	return append(ip, l4...)
}

func udpPacket(src, dst netip.AddrPort, payload []byte) []byte {
	u := make([]byte, 8, 8+len(payload))
	binary.BigEndian.PutUint16(u[0:], src.Port())
	binary.BigEndian.PutUint16(u[2:], dst.Port())
	binary.BigEndian.PutUint16(u[4:], uint16(8+len(payload)))
	return ipPacket(src.Addr(), dst.Addr(), 17, append(u, payload...), 6)
}

const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpPSH = 0x08
	tcpACK = 0x10
)

// tcpPacket builds a TCP segment; with SYN it carries an MSS option.
func tcpPacket(src, dst netip.AddrPort, seq, ack uint32, flags uint8, mss uint16, payload []byte) []byte {
	hl := 20
	if flags&tcpSYN != 0 {
		hl = 24
	}
	t := make([]byte, hl, hl+len(payload))
	binary.BigEndian.PutUint16(t[0:], src.Port())
	binary.BigEndian.PutUint16(t[2:], dst.Port())
	binary.BigEndian.PutUint32(t[4:], seq)
	binary.BigEndian.PutUint32(t[8:], ack)
	t[12] = byte(hl/4) << 4
	t[13] = flags
	binary.BigEndian.PutUint16(t[14:], 65535)
	if hl == 24 {
		t[20], t[21] = 2, 4
		binary.BigEndian.PutUint16(t[22:], mss)
	}
	return ipPacket(src.Addr(), dst.Addr(), 6, append(t, payload...), 16)
}

// parsed is what tests look at in a packet read from a queue.
type parsed struct {
	src, dst   netip.AddrPort
	proto      uint8
	flags      uint8 // TCP
	seq        uint32
	payload    []byte
	l4Checksum bool // the L4 checksum verifies
}

func parse(p []byte) (parsed, bool) {
	var r parsed
	var src, dst netip.Addr
	var l4 []byte
	switch {
	case len(p) >= 20 && p[0]>>4 == 4:
		hl := int(p[0]&15) * 4
		tl := int(binary.BigEndian.Uint16(p[2:]))
		if tl > len(p) || hl > tl {
			return r, false
		}
		r.proto = p[9]
		src, dst = netip.AddrFrom4([4]byte(p[12:16])), netip.AddrFrom4([4]byte(p[16:20]))
		l4 = p[hl:tl]
	case len(p) >= 40 && p[0]>>4 == 6:
		pl := int(binary.BigEndian.Uint16(p[4:]))
		if 40+pl > len(p) {
			return r, false
		}
		r.proto = p[6]
		src, dst = netip.AddrFrom16([16]byte(p[8:24])), netip.AddrFrom16([16]byte(p[24:40]))
		l4 = p[40 : 40+pl]
	default:
		return r, false
	}
	if len(l4) < 8 {
		return r, false
	}
	r.src = netip.AddrPortFrom(src, binary.BigEndian.Uint16(l4[0:]))
	r.dst = netip.AddrPortFrom(dst, binary.BigEndian.Uint16(l4[2:]))
	r.l4Checksum = fold(checksum(pseudoSum(src, dst, r.proto, len(l4)), l4)) == 0
	switch r.proto {
	case 17:
		r.payload = l4[8:]
	case 6:
		if len(l4) < 20 {
			return r, false
		}
		r.seq = binary.BigEndian.Uint32(l4[4:])
		r.flags = l4[13]
		r.payload = l4[int(l4[12]>>4)*4:]
	}
	return r, true
}
