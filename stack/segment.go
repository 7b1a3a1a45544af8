package stack

import (
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	gvstack "gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/ipsecd/ipsecd/internal/iphdr"
)

// maxHeaderLen is the most header bytes (IP with options or extension
// headers, and TCP with options) a TCP super-packet may carry to be split;
// one with more is dropped. IPv4 60 + TCP 60, or IPv6 40 plus a little
// room for extension headers + TCP 60.
const maxHeaderLen = 192

// segmenter turns the packets netstack writes into the packets that go on
// the wire, copying each into a caller's buffer: the one copy of the
// outbound path. A TCP super-packet (host GSO, docs/design.md lesson 3) becomes
// MSS-sized segments, each with its own IP length, IPv4 id and header
// checksum, TCP sequence number, flags and checksum, as Linux's
// tcp_gso_segment makes them. Any other packet is copied as it is, except
// that a TCP packet whose checksum netstack left partial (GSO.NeedsCsum)
// gets it completed.
//
// A segmenter holds one packet at a time, with a reference taken by
// start and dropped by release; it reads the packet's bytes where netstack
// keeps them and never writes them (they are shared with TCP's retransmit
// queue). It is not safe for concurrent use and allocates nothing.
type segmenter struct {
	pkt *gvstack.PacketBuffer // nil when idle

	// The packet's bytes are read in order through a cursor over its
	// views: v is the current view, off the offset in it.
	v   *buffer.View
	off int

	// Set by start for a packet that is split or checksummed.
	tcp    bool // a TCP packet to fix up (GSO)
	v4     bool
	l3Len  int // IP header bytes, options or extension headers included
	hdrLen int // IP and TCP header bytes
	mss    int // payload bytes per segment
	left   int // payload bytes not yet copied
	seg    int // segments made so far
	total  int // bytes of a packet that is copied whole
	hdr    [maxHeaderLen]byte
	seq    uint32
	id     uint16
	flags  uint8
	srcDst uint16 // checksum of the pseudo-header's addresses and protocol
}

// start takes pkt (the caller's reference) and readies its first packet.
// It reports false, and takes nothing, for a packet it cannot split:
// a GSO packet whose headers are longer than maxHeaderLen or malformed.
func (s *segmenter) start(pkt *gvstack.PacketBuffer) bool {
	vl, off := pkt.AsViewList()
	*s = segmenter{pkt: pkt, v: vl.Front(), off: off}
	s.skipEmpty()
	gso := pkt.GSOOptions
	if gso.Type != gvstack.GSOTCPv4 && gso.Type != gvstack.GSOTCPv6 {
		s.total = pkt.Size()
		return true
	}
	l3 := len(pkt.NetworkHeader().Slice())
	l4 := len(pkt.TransportHeader().Slice())
	size := pkt.Size()
	if l3+l4 > maxHeaderLen || l4 < iphdr.TCPMinLen || l3+l4 > size {
		*s = segmenter{}
		return false
	}
	s.tcp = true
	s.v4 = gso.Type == gvstack.GSOTCPv4
	s.l3Len, s.hdrLen = l3, l3+l4
	s.left = size - s.hdrLen
	s.mss = int(gso.MSS)
	if s.mss <= 0 || s.mss > s.left {
		s.mss = max(s.left, 1)
	}
	s.read(s.hdr[:s.hdrLen])
	h := s.hdr[:s.hdrLen]
	var addrs []byte
	if s.v4 {
		ip := iphdr.IPv4(h)
		if !ip.IsValid() || ip.HeaderLen() != l3 {
			*s = segmenter{}
			return false
		}
		s.id = ip.ID()
		addrs = ip.Addrs()
	} else {
		ip := iphdr.IPv6(h)
		if !ip.IsValid() || l3 < iphdr.IPv6Len {
			*s = segmenter{}
			return false
		}
		addrs = ip.Addrs()
	}
	s.srcDst = checksum.Combine(checksum.Checksum(addrs, 0), iphdr.ProtocolTCP)
	tcp := iphdr.TCP(h[l3:])
	s.seq = tcp.Seq()
	s.flags = tcp.Flags()
	return true
}

// active reports whether a packet is held.
func (s *segmenter) active() bool { return s.pkt != nil }

// done reports whether every segment of the held packet was made.
func (s *segmenter) done() bool {
	if s.tcp {
		return s.seg > 0 && s.left == 0
	}
	return s.seg > 0
}

// release drops the held packet's reference.
func (s *segmenter) release() {
	if s.pkt != nil {
		s.pkt.DecRef()
	}
	*s = segmenter{}
}

// next writes the next segment to dst[:n]. ok is false when it does not fit
// in dst; the packet should then be dropped (release).
func (s *segmenter) next(dst []byte) (n int, ok bool) {
	if !s.tcp {
		if s.total > len(dst) {
			return 0, false
		}
		s.read(dst[:s.total])
		s.seg++
		return s.total, true
	}
	pl := min(s.mss, s.left)
	n = s.hdrLen + pl
	if n > len(dst) {
		return 0, false
	}
	last := pl == s.left
	copy(dst, s.hdr[:s.hdrLen])
	s.read(dst[s.hdrLen:n])

	ip := dst[:s.l3Len]
	if s.v4 {
		h := iphdr.IPv4(ip)
		h.SetTotalLen(n)
		h.SetID(s.id + uint16(s.seg))
		h.UpdateChecksum()
	} else {
		iphdr.IPv6(ip).SetPayloadLen(n - iphdr.IPv6Len)
	}
	tcp := iphdr.TCP(dst[s.l3Len:n])
	tcp.SetSeq(s.seq + uint32(s.seg*s.mss))
	flags := s.flags
	if !last {
		flags &^= iphdr.TCPFlagFin | iphdr.TCPFlagPsh
	}
	if s.seg > 0 {
		flags &^= iphdr.TCPFlagCwr
	}
	tcp.SetFlags(flags)
	tcp.SetChecksum(0)
	xsum := checksum.Combine(s.srcDst, uint16(len(tcp)))
	tcp.SetChecksum(^checksum.Checksum(tcp, xsum))

	s.left -= pl
	s.seg++
	return n, true
}

// read copies the next len(dst) bytes of the packet into dst.
func (s *segmenter) read(dst []byte) {
	for len(dst) > 0 && s.v != nil {
		b := s.v.AsSlice()[s.off:]
		k := copy(dst, b)
		dst = dst[k:]
		s.off += k
		s.skipEmpty()
	}
}

// skipEmpty moves the cursor past the end of exhausted views.
func (s *segmenter) skipEmpty() {
	for s.v != nil && s.off >= s.v.Size() {
		s.off -= s.v.Size()
		s.v = s.v.Next()
	}
}
