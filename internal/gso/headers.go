// Package gso cuts TCP and UDP super-packets (generic segmentation
// offload: TSO, USO) into the segments Linux's own GSO would make
// (tcp_gso_segment, __udp_gso_segment and inet_gso_segment or
// ipv6_gso_segment in net/ipv4 and net/ipv6): each segment carries a copy
// of the super-packet's headers with its own IPv4 total length, id and
// header checksum or IPv6 payload length, its own TCP sequence number and
// flags (FIN and PSH only on the last, CWR only on the first) or UDP
// length, and a complete transport checksum, which peers check.
//
// Two users share the header arithmetic (Headers): the netstack link,
// which copies each segment out of netstack's buffers, and the TUN's
// transmit path (Frame), which cuts a virtio-net frame in place, so that
// the ESP seal reads each segment straight from the super-packet.
//
// Nothing here allocates; a Headers or a Frame is used by one goroutine.
package gso

import (
	"encoding/binary"

	"gvisor.dev/gvisor/pkg/tcpip/checksum"

	"github.com/ipsecd/ipsecd/internal/iphdr"
)

// MaxHeaderLen is the most header bytes (IP with options or extension
// headers, and TCP with options) a super-packet may carry to be cut; one
// with more is malformed. IPv4 60 + TCP 60, or IPv6 40 plus room for
// extension headers + TCP 60.
const MaxHeaderLen = 192

// udpChecksumOffset and tcpChecksumOffset are where the checksum sits in
// the transport header: what a virtio-net header's csum_offset must say.
const (
	udpChecksumOffset = 6
	tcpChecksumOffset = 16
)

// Headers is what every segment of one super-packet shares, read from its
// headers by Init; Fix writes one segment's own fields. The zero value is
// not usable.
type Headers struct {
	V4     bool // IPv4, else IPv6
	TCP    bool // TCP (TSO), else UDP (USO)
	L3Len  int  // IP header bytes, options or extension headers included
	HdrLen int  // IP and transport header bytes: where the payload starts
	MSS    int  // payload bytes per segment (the last may have fewer)

	id     uint16 // IPv4 id of the first segment
	seq    uint32 // TCP sequence number of the first segment
	flags  uint8  // TCP flags of the super-packet
	srcDst uint16 // checksum of the pseudo-header's addresses and protocol
}

// Init reads the shared fields from hdr, the super-packet's first
// h.HdrLen bytes, after the caller set V4, TCP, L3Len, HdrLen and MSS. It
// reports false when the headers do not say what the caller set: an IPv4
// header whose IHL is not L3Len, an IP header too short, a transport
// header outside hdr.
func (h *Headers) Init(hdr []byte) bool {
	if h.HdrLen > len(hdr) || h.HdrLen > MaxHeaderLen || h.MSS <= 0 {
		return false
	}
	hdr = hdr[:h.HdrLen]
	var addrs []byte
	proto := uint8(iphdr.ProtocolUDP)
	if h.TCP {
		proto = iphdr.ProtocolTCP
	}
	if h.V4 {
		ip := iphdr.IPv4(hdr)
		if !ip.IsValid() || ip.HeaderLen() != h.L3Len {
			return false
		}
		h.id = ip.ID()
		addrs = ip.Addrs()
	} else {
		ip := iphdr.IPv6(hdr)
		if !ip.IsValid() || h.L3Len < iphdr.IPv6Len {
			return false
		}
		addrs = ip.Addrs()
	}
	l4 := hdr[h.L3Len:]
	if h.TCP {
		tcp := iphdr.TCP(l4)
		if !tcp.IsValid() || tcp.HeaderLen() != len(l4) {
			return false
		}
		h.seq, h.flags = tcp.Seq(), tcp.Flags()
	} else if len(l4) != iphdr.UDPLen {
		return false
	}
	h.srcDst = checksum.Combine(checksum.Checksum(addrs, 0), uint16(proto))
	return true
}

// Fix makes seg segment k of the super-packet: on entry seg[:HdrLen] is a
// copy of the super-packet's headers and seg[HdrLen:] the segment's
// payload; last says it is the final segment. It writes the lengths, the
// IPv4 id and header checksum, the TCP sequence number and flags or the
// UDP length, and the transport checksum over the whole segment.
func (h *Headers) Fix(seg []byte, k int, last bool) {
	n := len(seg)
	if h.V4 {
		ip := iphdr.IPv4(seg[:h.L3Len])
		ip.SetTotalLen(n)
		ip.SetID(h.id + uint16(k))
		ip.UpdateChecksum()
	} else {
		iphdr.IPv6(seg[:h.L3Len]).SetPayloadLen(n - iphdr.IPv6Len)
	}
	l4 := seg[h.L3Len:]
	sum := checksum.Combine(h.srcDst, uint16(len(l4)))
	if h.TCP {
		tcp := iphdr.TCP(l4)
		tcp.SetSeq(h.seq + uint32(k*h.MSS))
		flags := h.flags
		if !last {
			flags &^= iphdr.TCPFlagFin | iphdr.TCPFlagPsh
		}
		if k > 0 {
			flags &^= iphdr.TCPFlagCwr
		}
		tcp.SetFlags(flags)
		tcp.SetChecksum(0)
		tcp.SetChecksum(^checksum.Checksum(tcp, sum))
		return
	}
	binary.BigEndian.PutUint16(l4[4:], uint16(len(l4)))
	l4[udpChecksumOffset], l4[udpChecksumOffset+1] = 0, 0
	c := ^checksum.Checksum(l4, sum)
	if c == 0 {
		c = 0xffff // RFC 768: zero means no checksum
	}
	binary.BigEndian.PutUint16(l4[udpChecksumOffset:], c)
}
