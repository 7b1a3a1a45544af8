// Package gro coalesces the inbound TCP segments of a batch into
// super-packets for a TUN opened with IFF_VNET_HDR, without copying a
// payload: a super-packet is written with one writev(2), its first
// segment whole (header and payload) behind a virtio-net header that
// describes the segmentation (GSO TCPv4/TCPv6, segment size, header
// length), then only the payloads of the segments that follow it. The
// kernel copies the parts into one socket buffer, as it would the single
// buffer wireguard/tun's GRO copies the payloads into first.
//
// The checksum is left partial (NEEDS_CSUM: the TCP checksum field holds
// the pseudo-header's sum), which the kernel takes on ingress as verified
// (CHECKSUM_PARTIAL), as wireguard/tun's GRO marks its super-packets; the
// segments are not checksummed here: ESP's ICV authenticated every byte
// of them. The IPv4 header checksum, 20 bytes, is still checked.
//
// What the kernel then sees is exactly the segments it was given: a
// segment joins a super-packet only when resegmenting it (the kernel's
// GSO, on forwarding) gives it back byte for byte. Its IP and TCP headers
// must equal the first segment's except where segmentation rewrites them
// (IPv4 total length, identification = the first's + its index, header
// checksum; IPv6 payload length; TCP sequence number = the first's + its
// index × segment size, PSH on the last segment only, checksum); flags
// ACK, or ACK|PSH ending the super-packet; every segment but the last
// exactly the first's payload size, the last at most that. SYN, FIN, RST,
// URG, ECE and CWR segments, IPv4 options or fragments, IPv6 extension
// headers and anything not TCP are written alone, with an empty
// virtio-net header, as wireguard/tun writes what it does not coalesce
// (or left to the caller: TCP says which frames hold no TCP).
//
// A Coalescer allocates only when a batch is larger than any before; it
// is not safe for concurrent use. Malformed packets never make it panic:
// they are written alone.
package gro

import (
	"bytes"
	"encoding/binary"

	"github.com/ipsecd/ipsecd/internal/iphdr"
	"github.com/ipsecd/ipsecd/internal/vnet"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
)

// maxOpen is how many super-packets a Coalescer keeps open to further
// segments at once: more concurrent flows in one batch than this coalesce
// less, never wrongly.
const maxOpen = 8

// maxLen is the largest super-packet: its IPv4 total length, or its IPv6
// payload length plus the header, fits in 16 bits (as wireguard/tun).
const maxLen = 0xffff

const (
	tcpFlagACK = 0x10
	tcpFlagPSH = iphdr.TCPFlagPsh
)

// Coalescer plans the writes of one batch (Plan), then hands them out one
// by one (Frame). Its zero value is ready to use.
type Coalescer struct {
	bufs   [][]byte // the batch Plan was given
	offset int
	segs   []segment // per packet of the batch
	next   []int32   // the next packet of the same frame, or -1
	frames []frame   // in the order of their first packet
	open   []int32   // frames that may take more segments, oldest first
	parts  [][]byte  // the parts of the frame Frame last returned
}

// segment is what Plan read from one packet's headers.
type segment struct {
	tcp     bool // a TCP segment that may join others
	v6      bool
	psh     bool
	ihl     int // IP header length
	hdr     int // IP and TCP header length
	payload int
	seq     uint32
}

// frame is one write: packets head, next[head], ..., tail.
type frame struct {
	head, tail int32
	segs       int32
	total      int  // bytes of the super-packet: head's headers and every payload
	open       bool // may take another segment
}

// Plan groups the packets bufs[i][offset:] into frames, each written with
// one Frame call, in the order of their first packet; a flow's packets
// stay in their order. offset must be at least vnet.HeaderLen: Plan writes
// the virtio-net header in front of each frame's first packet, and
// rewrites that packet's IP and TCP headers to describe the super-packet.
// The Coalescer keeps bufs until the next Plan.
func (c *Coalescer) Plan(bufs [][]byte, offset int) {
	if offset < vnet.HeaderLen {
		panic("gro: offset leaves no room for the virtio-net header")
	}
	c.bufs, c.offset = bufs, offset
	if cap(c.segs) < len(bufs) {
		c.segs = make([]segment, len(bufs))
		c.next = make([]int32, len(bufs))
		c.frames = make([]frame, 0, len(bufs))
		c.parts = make([][]byte, 0, len(bufs))
	}
	if c.open == nil {
		c.open = make([]int32, 0, maxOpen)
	}
	c.segs, c.next = c.segs[:len(bufs)], c.next[:len(bufs)]
	c.frames, c.open = c.frames[:0], c.open[:0]
	for i := range bufs {
		pkt := bufs[i][offset:]
		s := parseSegment(pkt)
		c.segs[i], c.next[i] = s, -1
		if s.tcp && c.join(int32(i), pkt, s) {
			continue
		}
		c.frames = append(c.frames, frame{head: int32(i), tail: int32(i), segs: 1, total: len(pkt), open: s.tcp && !s.psh})
		if s.tcp && !s.psh {
			c.keepOpen(int32(len(c.frames) - 1))
		}
	}
	for f := range c.frames {
		c.finish(&c.frames[f])
	}
}

// join appends packet i to the open frame of its flow and reports
// whether it could. A frame of its flow that cannot take it is closed,
// so that no later packet of the flow is written before i.
func (c *Coalescer) join(i int32, pkt []byte, s segment) bool {
	for k := len(c.open) - 1; k >= 0; k-- {
		f := &c.frames[c.open[k]]
		head := c.bufs[f.head][c.offset:]
		if !sameFlow(head, pkt, c.segs[f.head], s) {
			continue
		}
		if !c.fits(f, head, pkt, s) {
			f.open = false
			c.open = append(c.open[:k], c.open[k+1:]...)
			return false
		}
		c.next[f.tail] = i
		f.tail = i
		f.segs++
		f.total += s.payload
		if s.psh || s.payload < c.segs[f.head].payload {
			f.open = false
			c.open = append(c.open[:k], c.open[k+1:]...)
		}
		return true
	}
	return false
}

// keepOpen adds frame f to the open ones, closing the oldest if there
// are maxOpen already.
func (c *Coalescer) keepOpen(f int32) {
	if len(c.open) == maxOpen {
		c.frames[c.open[0]].open = false
		c.open = append(c.open[:0], c.open[1:]...)
	}
	c.open = append(c.open, f)
}

// fits reports whether packet pkt (segment s) can follow frame f, whose
// first packet is head: the kernel's segmentation of the super-packet
// must give pkt back byte for byte.
func (c *Coalescer) fits(f *frame, head, pkt []byte, s segment) bool {
	h := c.segs[f.head]
	if !f.open || s.hdr != h.hdr || s.payload > h.payload || f.total+s.payload > maxLen {
		return false
	}
	k := uint32(f.segs) // pkt's index in the super-packet
	if s.seq != h.seq+k*uint32(h.payload) {
		return false
	}
	// Compared a word at a time: this runs for every packet received.
	be := binary.BigEndian
	if s.v6 {
		// All but the payload length (bytes 4-5).
		if be.Uint32(pkt) != be.Uint32(head) || be.Uint16(pkt[6:]) != be.Uint16(head[6:]) ||
			!bytes.Equal(pkt[8:40], head[8:40]) {
			return false
		}
	} else {
		// All but the total length (2-3), the identification (4-5),
		// which segmentation counts up, and the checksum (10-11).
		if be.Uint16(pkt[4:]) != be.Uint16(head[4:])+uint16(k) || be.Uint16(pkt) != be.Uint16(head) ||
			be.Uint32(pkt[6:]) != be.Uint32(head[6:]) || be.Uint64(pkt[12:]) != be.Uint64(head[12:]) {
			return false
		}
	}
	// TCP: ports, acknowledgment number, data offset, window, urgent
	// pointer and options equal; the sequence number is checked above,
	// the flags by parseSegment (ACK, or ACK|PSH ending the frame), the
	// checksum is the super-packet's.
	t, ht := pkt[s.ihl:s.hdr], head[h.ihl:h.hdr]
	return be.Uint32(t) == be.Uint32(ht) && be.Uint32(t[8:]) == be.Uint32(ht[8:]) && t[12] == ht[12] &&
		be.Uint16(t[14:]) == be.Uint16(ht[14:]) && be.Uint16(t[18:]) == be.Uint16(ht[18:]) &&
		bytes.Equal(t[20:], ht[20:])
}

// finish writes frame f's virtio-net header and, for a super-packet, the
// IP lengths, IPv4 header checksum, PSH of its last segment and partial
// TCP checksum into its first packet.
func (c *Coalescer) finish(f *frame) {
	buf := c.bufs[f.head]
	vh := buf[c.offset-vnet.HeaderLen : c.offset]
	if f.segs == 1 {
		clear(vh) // no offload: the kernel checks the checksums
		return
	}
	pkt := buf[c.offset:]
	s := c.segs[f.head]
	h := vnet.Header{
		Flags:      vnet.FlagNeedsCsum,
		GSOType:    vnet.GSOTCPv4,
		HdrLen:     uint16(s.hdr),
		GSOSize:    uint16(s.payload),
		CsumStart:  uint16(s.ihl),
		CsumOffset: 16,
	}
	var addrs []byte
	if s.v6 {
		h.GSOType = vnet.GSOTCPv6
		binary.BigEndian.PutUint16(pkt[4:], uint16(f.total-s.ihl))
		addrs = pkt[8:40]
	} else {
		ip := iphdr.IPv4(pkt)
		ip.SetTotalLen(f.total)
		ip.UpdateChecksum()
		addrs = ip.Addrs()
	}
	h.Encode(vh)
	tcp := iphdr.TCP(pkt[s.ihl:])
	if c.segs[f.tail].psh {
		tcp.SetFlags(tcp.Flags() | tcpFlagPSH)
	}
	tcp.SetChecksum(pseudoHeaderSum(addrs, f.total-s.ihl))
}

// Frames is how many frames the last Plan made.
func (c *Coalescer) Frames() int { return len(c.frames) }

// Frame returns frame f of the last Plan as the parts of one write, in
// order: its first packet with the virtio-net header in front, then the
// payload of each further segment; and how many packets it carries. parts
// is valid until the next Frame or Plan.
func (c *Coalescer) Frame(f int) (parts [][]byte, packets int) {
	fr := &c.frames[f]
	parts = append(c.parts[:0], c.bufs[fr.head][c.offset-vnet.HeaderLen:])
	hdr := c.segs[fr.head].hdr
	for i := c.next[fr.head]; i >= 0; i = c.next[i] {
		parts = append(parts, c.bufs[i][c.offset+hdr:])
	}
	c.parts = parts
	return parts, int(fr.segs)
}

// TCP reports whether frame f of the last Plan holds TCP: a super-packet,
// or a segment that could have been one. A caller may write the other
// frames, single packets of other protocols, its own way (wireguard/tun's
// Write coalesces UDP datagrams where the kernel takes USO).
func (c *Coalescer) TCP(f int) bool { return c.segs[c.frames[f].head].tcp }

// Head is the index in the batch of frame f's first packet.
func (c *Coalescer) Head(f int) int { return int(c.frames[f].head) }

// Reset drops the Coalescer's references to the last batch.
func (c *Coalescer) Reset() {
	c.bufs = nil
	clear(c.parts[:cap(c.parts)])
}

// parseSegment reads pkt's headers; s.tcp is false for a packet that must
// be written alone.
func parseSegment(pkt []byte) (s segment) {
	if len(pkt) > maxLen {
		return s
	}
	switch iphdr.Version(pkt) {
	case 4:
		ip := iphdr.IPv4(pkt)
		if len(pkt) < iphdr.IPv4MinLen || ip.HeaderLen() != iphdr.IPv4MinLen || ip.TotalLen() != len(pkt) ||
			ip.Protocol() != iphdr.ProtocolTCP || ip.IsFragment() || !ip.ChecksumValid() {
			return s
		}
		s.ihl = iphdr.IPv4MinLen
	case 6:
		ip := iphdr.IPv6(pkt)
		if !ip.IsValid() || ip.PayloadLen() != len(pkt)-iphdr.IPv6Len || ip.NextHeader() != iphdr.ProtocolTCP {
			return s
		}
		s.ihl, s.v6 = iphdr.IPv6Len, true
	default:
		return s
	}
	tcp := iphdr.TCP(pkt[s.ihl:])
	if !tcp.IsValid() {
		return s
	}
	switch tcp.Flags() {
	case tcpFlagACK:
	case tcpFlagACK | tcpFlagPSH:
		s.psh = true
	default:
		return s
	}
	s.hdr = s.ihl + tcp.HeaderLen()
	s.payload = len(pkt) - s.hdr
	s.seq = tcp.Seq()
	s.tcp = s.payload > 0
	return s
}

// sameFlow reports whether two TCP segments are of one flow: addresses
// and ports.
func sameFlow(a, b []byte, sa, sb segment) bool {
	if sa.v6 != sb.v6 {
		return false
	}
	be := binary.BigEndian
	if be.Uint32(a[sa.ihl:]) != be.Uint32(b[sb.ihl:]) { // ports
		return false
	}
	if sa.v6 {
		return bytes.Equal(a[8:40], b[8:40])
	}
	return be.Uint64(a[12:]) == be.Uint64(b[12:])
}

// pseudoHeaderSum is the folded (not complemented) ones' complement sum of
// the TCP pseudo-header (RFC 9293 §3.1) with the addresses addrs (source
// then destination) and TCP length n: what a partial checksum field holds.
func pseudoHeaderSum(addrs []byte, n int) uint16 {
	return checksum.Combine(checksum.Combine(checksum.Checksum(addrs, 0), iphdr.ProtocolTCP), uint16(n))
}
