package satest

import (
	"encoding/binary"
	"net/netip"
)

// TCPFlow describes the segments TCPSegments builds: one direction of a
// TCP connection, as a sender's TSO would cut it.
type TCPFlow struct {
	Src, Dst   netip.AddrPort // both IPv4 or both IPv6
	Seq        uint32         // of the first segment
	Ack        uint32         // the acknowledgment number of every segment
	ID         uint16         // IPv4 identification of the first segment, counted up
	Timestamps bool           // a 12-byte options block (NOP, NOP, timestamps)
}

// TCPSegments returns one ACK segment per payload size, consecutive in
// sequence, with valid IPv4 header and TCP checksums, DF set, TTL or hop
// limit 64 and payload bytes that differ between segments; flags, if
// non-zero, replaces the last segment's flags (0x18: ACK|PSH).
func TCPSegments(f TCPFlow, sizes []int, lastFlags uint8) [][]byte {
	v6 := f.Src.Addr().Is6()
	ihl, thl := 20, 20
	if v6 {
		ihl = 40
	}
	if f.Timestamps {
		thl += 12
	}
	seq := f.Seq
	segs := make([][]byte, len(sizes))
	for k, n := range sizes {
		p := make([]byte, ihl+thl+n)
		if v6 {
			p[0] = 0x60
			binary.BigEndian.PutUint16(p[4:], uint16(thl+n))
			p[6], p[7] = 6, 64
			copy(p[8:], f.Src.Addr().AsSlice())
			copy(p[24:], f.Dst.Addr().AsSlice())
		} else {
			p[0] = 0x45
			binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
			binary.BigEndian.PutUint16(p[4:], f.ID+uint16(k))
			p[6], p[8], p[9] = 0x40, 64, 6
			copy(p[12:], f.Src.Addr().AsSlice())
			copy(p[16:], f.Dst.Addr().AsSlice())
			binary.BigEndian.PutUint16(p[10:], ^OnesSum(0, p[:20]))
		}
		t := p[ihl:]
		binary.BigEndian.PutUint16(t[0:], f.Src.Port())
		binary.BigEndian.PutUint16(t[2:], f.Dst.Port())
		binary.BigEndian.PutUint32(t[4:], seq)
		binary.BigEndian.PutUint32(t[8:], f.Ack)
		t[12] = byte(thl/4) << 4
		t[13] = 0x10 // ACK
		if k == len(sizes)-1 && lastFlags != 0 {
			t[13] = lastFlags
		}
		binary.BigEndian.PutUint16(t[14:], 502) // window
		if f.Timestamps {
			copy(t[20:], []byte{1, 1, 8, 10, 0, 0, 0x10, 0, 0, 0, 0x20, 0})
		}
		for i := thl; i < len(t); i++ {
			t[i] = byte(int(seq) + i*7)
		}
		SetTCPChecksum(p)
		segs[k] = p
		seq += uint32(n)
	}
	return segs
}

// SetTCPChecksum computes the TCP checksum of an IPv4 (without options)
// or IPv6 (without extension headers) TCP packet and writes it.
func SetTCPChecksum(p []byte) {
	ihl, addrs := 20, p[12:20]
	if p[0]>>4 == 6 {
		ihl, addrs = 40, p[8:40]
	}
	t := p[ihl:]
	t[16], t[17] = 0, 0
	sum := OnesSum(uint32(6)+uint32(len(t)), addrs)
	binary.BigEndian.PutUint16(t[16:], ^OnesSum(uint32(sum), t))
}

// OnesSum adds b's 16-bit words (a last odd byte padded with zero) to sum
// and folds the result to 16 bits (RFC 1071), not complemented.
func OnesSum(sum uint32, b []byte) uint16 {
	for ; len(b) >= 2; b = b[2:] {
		sum += uint32(binary.BigEndian.Uint16(b))
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return uint16(sum)
}
