package gso

import (
	"encoding/binary"
	"errors"

	"gvisor.dev/gvisor/pkg/tcpip/checksum"

	"github.com/ipsecd/ipsecd/internal/iphdr"
	"github.com/ipsecd/ipsecd/internal/vnet"
)

// Tailroom is the space a frame's buffer must have after the frame: the
// last segment's ESP trailer (padding to a cipher block, pad length, next
// header) is written there, as every other segment's is written over the
// start of the next one (Segment).
const Tailroom = 32

// Errors of Parse: the frame is dropped (a TUN never hands out such a
// frame; a kernel bug or a test might).
var (
	ErrFrame    = errors.New("gso: malformed virtio-net frame")
	ErrTooLarge = errors.New("gso: super-packet has more or longer segments than allowed")
)

// Frame is one virtio-net frame read from a TUN (a vnet.Header, then one
// IP packet, or a TCP or UDP super-packet with the segment size to cut it
// at), cut in place into the packets that go on the wire.
//
// Segment k is laid out where it will be read: its headers are written
// just before its payload in the frame's own buffer (over the end of
// segment k-1's payload, which the caller is done with), so that the ESP
// seal reads [headers | payload | trailer] straight from the frame and no
// segment is copied. The zero value is empty; Parse fills it. A Frame is
// used by one goroutine and allocates nothing.
type Frame struct {
	pkt      []byte // the packet, after the virtio-net header; its capacity holds Tailroom more
	h        Headers
	gso      bool
	segments int
	hdr      [MaxHeaderLen]byte // the super-packet's headers, as read

	// The bytes a segment's trailer covers (the start of the next
	// payload), put back before the next segment is laid out.
	saved    [Tailroom]byte
	savedAt  int
	savedLen int
}

// Parse reads buf, one frame as read from the TUN: the virtio-net header
// and the packet. buf's capacity must leave Tailroom bytes after it. A
// super-packet is cut into at most maxSegments segments of at most
// maxSegLen bytes each, or the frame is refused with ErrTooLarge. A
// frame whose header does not describe its packet (an unknown GSO type,
// one of the other IP version, lengths, header lengths or checksum
// offsets outside the packet) is ErrFrame. A packet that is not cut but
// whose checksum is left partial (NEEDS_CSUM) gets it completed here.
func (f *Frame) Parse(buf []byte, maxSegments, maxSegLen int) error {
	*f = Frame{savedAt: -1}
	var vh vnet.Header
	if !vh.Decode(buf) || cap(buf)-len(buf) < Tailroom {
		return ErrFrame
	}
	pkt := buf[vnet.HeaderLen:]
	if len(pkt) == 0 {
		return ErrFrame
	}
	start, off := int(vh.CsumStart), int(vh.CsumOffset)
	gsoType := vh.GSOType &^ vnet.GSOECN
	if gsoType == vnet.GSONone {
		if vh.Flags&vnet.FlagNeedsCsum != 0 {
			if start+off+2 > len(pkt) {
				return ErrFrame
			}
			// The field holds the pseudo-header's sum: fold in the rest.
			// A result of zero goes out as 0xffff, as Linux's
			// skb_checksum_help sends it (CSUM_MANGLED_0): to UDP a
			// zero would mean no checksum, which IPv6 forbids.
			at := start + off
			initial := binary.BigEndian.Uint16(pkt[at:])
			pkt[at], pkt[at+1] = 0, 0
			c := ^checksum.Checksum(pkt[start:], initial)
			if c == 0 {
				c = 0xffff
			}
			binary.BigEndian.PutUint16(pkt[at:], c)
		}
		if len(pkt) > maxSegLen || maxSegments < 1 {
			return ErrTooLarge
		}
		f.pkt, f.segments = pkt, 1
		return nil
	}

	h := &f.h
	switch gsoType {
	case vnet.GSOTCPv4:
		h.V4, h.TCP = true, true
	case vnet.GSOTCPv6:
		h.TCP = true
	case vnet.GSOUDPL4:
		h.V4 = iphdr.Version(pkt) == 4
	default:
		return ErrFrame
	}
	if v := iphdr.Version(pkt); v != 4 && v != 6 || (v == 4) != h.V4 {
		return ErrFrame
	}
	// The kernel's hdr_len is only a hint (it can be the whole first
	// packet on the forward path): the headers end where the transport
	// header says.
	h.L3Len = start
	if h.TCP {
		if off != tcpChecksumOffset || start+iphdr.TCPMinLen > len(pkt) {
			return ErrFrame
		}
		h.HdrLen = start + iphdr.TCP(pkt[start:]).HeaderLen()
	} else {
		if off != udpChecksumOffset {
			return ErrFrame
		}
		h.HdrLen = start + iphdr.UDPLen
	}
	h.MSS = int(vh.GSOSize)
	if h.HdrLen >= len(pkt) || !h.Init(pkt) || !h.protocolMatches(pkt) {
		return ErrFrame
	}
	payload := len(pkt) - h.HdrLen
	f.segments = (payload + h.MSS - 1) / h.MSS
	if f.segments > maxSegments || h.HdrLen+min(h.MSS, payload) > maxSegLen {
		return ErrTooLarge
	}
	copy(f.hdr[:], pkt[:h.HdrLen])
	f.pkt, f.gso = pkt, true
	return nil
}

// protocolMatches reports whether the IP header of pkt carries the
// transport protocol h says (an IPv6 header followed by extension headers
// is taken as it comes).
func (h *Headers) protocolMatches(pkt []byte) bool {
	want := uint8(iphdr.ProtocolUDP)
	if h.TCP {
		want = iphdr.ProtocolTCP
	}
	if h.V4 {
		return iphdr.IPv4(pkt).Protocol() == want
	}
	return h.L3Len > iphdr.IPv6Len || iphdr.IPv6(pkt).NextHeader() == want
}

// Segments returns how many packets the frame is cut into.
func (f *Frame) Segments() int { return f.segments }

// Bytes returns the bytes of all the segments together: what goes on the
// wire, headers counted once per segment.
func (f *Frame) Bytes() int {
	if !f.gso {
		return len(f.pkt)
	}
	return len(f.pkt) + (f.segments-1)*f.h.HdrLen
}

// SegmentLen returns the length of segment k.
func (f *Frame) SegmentLen(k int) int {
	if !f.gso {
		return len(f.pkt)
	}
	start, end := f.bounds(k)
	return end - start
}

// Packet returns the first segment's headers as read (the whole packet
// when the frame is not cut): every segment has the same addresses and
// ports, for the lookup of its SA.
func (f *Frame) Packet() []byte {
	if !f.gso {
		return f.pkt
	}
	return f.hdr[:f.h.HdrLen]
}

// bounds returns where segment k starts (its headers) and ends in f.pkt.
func (f *Frame) bounds(k int) (start, end int) {
	start = k * f.h.MSS
	return start, min(f.h.HdrLen+(k+1)*f.h.MSS, len(f.pkt))
}

// Segment lays out segment k, 0 <= k < Segments, and returns it, with
// Tailroom bytes of capacity behind it that the caller may overwrite (the
// ESP trailer) until the next call. Calls go in increasing order of k,
// though one k may be asked for twice in a row; each call overwrites the
// end of the segment before (its headers go there), so the caller must be
// done with it.
func (f *Frame) Segment(k int) []byte {
	if !f.gso {
		return f.pkt[: len(f.pkt) : len(f.pkt)+Tailroom]
	}
	if f.savedAt >= 0 {
		copy(f.pkt[f.savedAt:], f.saved[:f.savedLen])
		f.savedAt = -1
	}
	start, end := f.bounds(k)
	seg := f.pkt[start:end]
	copy(seg, f.hdr[:f.h.HdrLen])
	f.h.Fix(seg, k, end == len(f.pkt))
	f.savedAt = end
	f.savedLen = copy(f.saved[:], f.pkt[end:])
	return f.pkt[start : end : end+Tailroom]
}
