package iphdr

import "encoding/binary"

// The start of the upper-layer headers the data path reads. TCP, UDP, SCTP
// and DCCP all begin with the source and destination ports:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          Source Port          |       Destination Port        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// UDP (RFC 768) then has its length (header included) and checksum; TCP
// (RFC 9293 §3.1) its sequence and acknowledgment numbers, then the data
// offset (header length in 32-bit words) in the top 4 bits of byte 12 and
// the flags in byte 13, then window, checksum and urgent pointer.
const (
	srcPort     = 0
	dstPort     = 2
	portsLen    = 4
	udpLength   = 4
	tcpSeq      = 4
	tcpDataOff  = 12
	tcpFlags    = 13
	tcpChecksum = 16
)

const (
	// UDPLen is the size of the UDP header.
	UDPLen = 8
	// TCPMinLen is the size of a TCP header without options.
	TCPMinLen = 20
)

// Ports returns the source and destination ports at the start of a TCP,
// UDP, SCTP or DCCP header; ok is false when b is too short to hold them.
func Ports(b []byte) (src, dst uint16, ok bool) {
	if len(b) < portsLen {
		return 0, 0, false
	}
	return binary.BigEndian.Uint16(b[srcPort:]), binary.BigEndian.Uint16(b[dstPort:]), true
}

// UDP is a UDP datagram, from the header on.
type UDP []byte

// IsValid reports whether b holds a whole UDP header.
func (b UDP) IsValid() bool { return len(b) >= UDPLen }

// Length returns the Length field: header and data, in bytes.
func (b UDP) Length() int { return int(binary.BigEndian.Uint16(b[udpLength:])) }

// TCP is a TCP segment, from the header on.
type TCP []byte

// IsValid reports whether b holds a whole TCP header: a data offset of at
// least 5 words, and at least that many bytes.
func (b TCP) IsValid() bool {
	if len(b) < TCPMinLen {
		return false
	}
	off := b.HeaderLen()
	return off >= TCPMinLen && off <= len(b)
}

// HeaderLen returns the header's length in bytes, options included (the
// data offset times 4).
func (b TCP) HeaderLen() int { return int(b[tcpDataOff]>>4) * 4 }

// Seq returns the sequence number.
func (b TCP) Seq() uint32 { return binary.BigEndian.Uint32(b[tcpSeq:]) }

// Flags returns the flags byte (CWR ECE URG ACK PSH RST SYN FIN, from the
// top bit down).
func (b TCP) Flags() uint8 { return b[tcpFlags] }

// SetSeq sets the sequence number.
func (b TCP) SetSeq(seq uint32) { binary.BigEndian.PutUint32(b[tcpSeq:], seq) }

// SetFlags sets the flags byte.
func (b TCP) SetFlags(f uint8) { b[tcpFlags] = f }

// SetChecksum sets the checksum field.
func (b TCP) SetChecksum(sum uint16) { binary.BigEndian.PutUint16(b[tcpChecksum:], sum) }

// TCP flags that segmentation clears on all segments but one.
const (
	TCPFlagFin = 0x01
	TCPFlagPsh = 0x08
	TCPFlagCwr = 0x80
)
