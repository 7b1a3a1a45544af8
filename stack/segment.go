package stack

import (
	"gvisor.dev/gvisor/pkg/buffer"
	gvstack "gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/ipsecd/ipsecd/internal/gso"
	"github.com/ipsecd/ipsecd/internal/iphdr"
)

// segmenter turns the packets netstack writes into the packets that go on
// the wire, copying each into a caller's buffer: the one copy of the
// outbound path. A TCP super-packet (host GSO, docs/design.md lesson 3) becomes
// MSS-sized segments, each with its own IP length, IPv4 id and header
// checksum, TCP sequence number, flags and checksum, as Linux's
// tcp_gso_segment makes them (gso.Headers). Any other packet is copied as it is, except
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
	tcp   bool        // a TCP packet to fix up (GSO)
	h     gso.Headers // its headers, when tcp
	left  int         // payload bytes not yet copied
	seg   int         // segments made so far
	total int         // bytes of a packet that is copied whole
	hdr   [gso.MaxHeaderLen]byte
}

// start takes pkt (the caller's reference) and readies its first packet.
// It reports false, and takes nothing, for a packet it cannot split:
// a GSO packet whose headers are longer than maxHeaderLen or malformed.
func (s *segmenter) start(pkt *gvstack.PacketBuffer) bool {
	vl, off := pkt.AsViewList()
	*s = segmenter{pkt: pkt, v: vl.Front(), off: off}
	s.skipEmpty()
	opts := pkt.GSOOptions
	if opts.Type != gvstack.GSOTCPv4 && opts.Type != gvstack.GSOTCPv6 {
		s.total = pkt.Size()
		return true
	}
	l3 := len(pkt.NetworkHeader().Slice())
	l4 := len(pkt.TransportHeader().Slice())
	size := pkt.Size()
	if l3+l4 > gso.MaxHeaderLen || l4 < iphdr.TCPMinLen || l3+l4 > size {
		*s = segmenter{}
		return false
	}
	s.tcp = true
	s.h = gso.Headers{V4: opts.Type == gvstack.GSOTCPv4, TCP: true, L3Len: l3, HdrLen: l3 + l4}
	s.left = size - s.h.HdrLen
	s.h.MSS = int(opts.MSS)
	if s.h.MSS <= 0 || s.h.MSS > s.left {
		s.h.MSS = max(s.left, 1)
	}
	s.read(s.hdr[:s.h.HdrLen])
	if !s.h.Init(s.hdr[:s.h.HdrLen]) {
		*s = segmenter{}
		return false
	}
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
	pl := min(s.h.MSS, s.left)
	n = s.h.HdrLen + pl
	if n > len(dst) {
		return 0, false
	}
	copy(dst, s.hdr[:s.h.HdrLen])
	s.read(dst[s.h.HdrLen:n])
	s.h.Fix(dst[:n], s.seg, pl == s.left)
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
