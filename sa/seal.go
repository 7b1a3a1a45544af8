package sa

import (
	"crypto/rand"
	"encoding/binary"

	"github.com/ipsecd/ipsecd/internal/iphdr"
	"github.com/ipsecd/ipsecd/sa/esp"
)

// SealBatch encrypts a batch of cleartext packets into ESP packets of this
// (outbound) SA, in place.
//
// On entry each packet's Buf[Off:Off+Len] is the cleartext: in tunnel mode a
// whole inner IPv4 or IPv6 packet (a fragment too: it is just a payload);
// in transport mode a whole IP datagram of the SA's family whose header
// (IPv4 with its options, or the fixed IPv6 header) is removed, its
// protocol becoming the next header. Transport mode refuses, as
// XfrmOutStateModeError, what the peer's rebuilt header would misdescribe:
// the rules are in the package doc ("Modes").
// A packet that is not IP is XfrmOutStateModeError in either mode. The
// ESP header and IV go into the
// Headroom before the payload, the padding, trailer and ICV into the
// Tailroom after it (up to len(Buf)). On return Buf[Off:Off+Len] is the ESP
// packet, SPI to ICV, ready for the underlay; Drop is CounterNone, or the
// counter the packet was counted in; SA is s.
//
// Sequence numbers are taken with one atomic add per batch, and compared
// once per batch with the SA's reservation (seq.go). Without ESN the SA
// refuses to go past 2^32-1, with ESN past 2^64-2^32, and refuses every
// batch after that (XfrmOutStateSeqError); a number that its SeqReserver
// could not reserve is refused the same way. AEAD IVs are the
// 64-bit sequence number (unique per key, RFC 4106 §3.1); CBC IVs are
// random (RFC 3602 §2.1). SealBatch allocates nothing.
func (s *SA) SealBatch(pkts []Packet) { s.sealBatch(pkts, nil) }

// TrailerRoom is the most bytes of ESP trailer (padding to a cipher block,
// pad length, next header) that SealSegments writes behind a segment's
// cleartext.
const TrailerRoom = 16 + esp.TrailerLen

// Segments is the cleartext of a batch that SealSegments reads from a
// buffer other than the packets' own: the segments of one super-packet
// (gso.Frame), which share their headers but for lengths, IPv4 ids,
// sequence numbers, flags and checksums, and so share one verdict.
type Segments interface {
	// Segment lays out segment i's cleartext and returns it, with at
	// least TrailerRoom bytes of capacity behind it that the seal may
	// overwrite until the next call. Calls go in increasing order of i
	// (the first may be asked for twice), and each may overwrite what
	// the call before returned.
	Segment(i int) []byte
}

// SealSegments seals the segments of one super-packet into ESP packets of
// this SA as SealBatch seals them after a copy of each segment into its
// own buffer, byte for byte the same, but reads each segment's cleartext
// from segs: packet i's ESP packet is written into its Buf around where
// Buf[Off:Off+Len] would hold segment i's cleartext, Len being that
// segment's length (segs.Segment(i) returns it), with the same Headroom and
// Tailroom; the segment is never copied there. The first segment is
// checked as SealBatch checks a packet, and its verdict is every
// segment's. Sequence numbers, counters, lifetimes and drops are
// SealBatch's; it allocates nothing.
func (s *SA) SealSegments(pkts []Packet, segs Segments) { s.sealBatch(pkts, segs) }

// sealBatch is SealBatch, or SealSegments when segs is not nil.
func (s *SA) sealBatch(pkts []Packet, segs Segments) {
	if !s.enter() { // removed from its SAD and wiped (retire.go)
		s.dropInvalid(pkts, XfrmOutStateInvalid)
		return
	}
	defer s.exit()
	t := s.t
	dropAll := CounterNone
	switch {
	case s.cfg.Dir != DirOut:
		dropAll = XfrmOutStateDirError
	case s.hardExpired.Load():
		dropAll = XfrmOutStateExpired
	case s.exhausted.Load():
		// Checked before the add, so that the counter stops moving
		// and can never wrap round to numbers already used (seq.go).
		dropAll = XfrmOutStateSeqError
	}

	// Pass 1: check each packet, find its payload, count the good ones.
	// Segments share one verdict, that of the first.
	var segVerdict Counter
	var segHdrLen int
	var segProto uint8
	if segs != nil && dropAll == CounterNone && len(pkts) != 0 {
		segHdrLen, segProto, segVerdict = s.checkCleartext(segs.Segment(0))
	}
	var n, nbytes uint64
	for i := range pkts {
		p := &pkts[i]
		p.SA, p.Proto, p.seq = s, 0, 0
		p.Drop = dropAll
		switch {
		case dropAll != CounterNone:
		case segs == nil:
			p.Drop = s.prepareSeal(p)
		case segVerdict != CounterNone:
			p.Drop = segVerdict
		default:
			p.Proto = segProto
			p.Drop = s.fitSeal(p, segHdrLen)
		}
		if p.Drop != CounterNone {
			s.counters.Inc(p.Drop)
			continue
		}
		n++
		nbytes += uint64(p.Len)
	}
	if n == 0 {
		return
	}

	// One atomic add each for the sequence numbers, packets and bytes,
	// and one compare against the reservation (seq.go): past it, the
	// slow path reserves more, or says how far this batch may go.
	last := s.seq.Add(n)
	first := last - n + 1
	usable := last
	if last > s.reserved.Load() || last < n { // last < n: the add wrapped
		usable = s.usableUpTo(last, n)
	}
	var pktsBefore, bytesBefore uint64
	pktsBefore = s.packets.Add(n) - n
	bytesBefore = s.bytes.Add(nbytes) - nbytes
	limits := s.hasCountLimits()
	var refusedPkts, refusedBytes uint64
	var soft, hard string

	seq := first
	for i := range pkts {
		p := &pkts[i]
		if p.Drop != CounterNone {
			continue
		}
		thisSeq := seq
		seq++
		plen := uint64(p.Len)
		bytesBefore += plen
		pktsBefore++
		allowed := true
		if limits {
			var sr, hr string
			allowed, sr, hr = s.countLimits(bytesBefore-plen, bytesBefore, pktsBefore-1, pktsBefore)
			if sr != "" {
				soft = sr
			}
			if hr != "" {
				hard = hr
			}
		}
		if !allowed {
			p.Drop = XfrmOutStateExpired
		} else if thisSeq == 0 || thisSeq > usable {
			// Past the end of the counter, or not durably reserved
			// (the state directory could not be written): a number
			// the next run might use again. Linux counts a sequence
			// number the SA cannot use as XfrmOutStateSeqError.
			p.Drop = XfrmOutStateSeqError
		}
		if p.Drop != CounterNone {
			s.counters.Inc(p.Drop)
			refusedPkts++
			refusedBytes += plen
			continue
		}
		if !s.esn && thisSeq >= seqSoftLimit {
			soft = ReasonSeq
		}
		var plain []byte
		if segs != nil {
			seg := segs.Segment(i)
			if len(seg) != segHdrLen+p.Len || cap(seg)-len(seg) < TrailerRoom {
				panic("sa: SealSegments: a segment is not its packet's length, or has no room for the trailer")
			}
			plain = seg[segHdrLen:]
		}
		s.sealOne(t, p, thisSeq, plain)
	}
	if refusedPkts != 0 {
		s.packets.Add(-refusedPkts)
		s.bytes.Add(-refusedBytes)
	}
	s.raise(soft, hard)
}

// prepareSeal checks the packet's cleartext and room, stores the next
// header in p.Proto, and narrows p.Off and p.Len to the payload (the
// whole packet in tunnel mode, what follows the IP header in transport
// mode), which sealOne then wraps.
func (s *SA) prepareSeal(p *Packet) Counter {
	if p.Off < 0 || p.Len < 0 || p.Off+p.Len > len(p.Buf) {
		return XfrmOutError
	}
	hdrLen, proto, drop := s.checkCleartext(p.Buf[p.Off : p.Off+p.Len])
	if drop != CounterNone {
		return drop
	}
	p.Proto = proto
	return s.fitSeal(p, hdrLen)
}

// checkCleartext checks that the SA's mode can carry data, a cleartext
// packet, and returns the length of the header that mode strips (0 in
// tunnel mode) and the next header.
func (s *SA) checkCleartext(data []byte) (hdrLen int, proto uint8, drop Counter) {
	if s.cfg.Mode == ModeTunnel {
		nh, ok := tunnelNextHeader(data)
		if !ok {
			return 0, 0, XfrmOutStateModeError
		}
		return 0, nh, CounterNone
	}
	// The peer rebuilds the header in the SA's family, so a packet of
	// the other family could only arrive as garbage.
	if (iphdr.Version(data) == 4) != s.cfg.Src.Is4() {
		return 0, 0, XfrmOutStateModeError
	}
	hl, nh, ok := transportHeader(data)
	if !ok {
		return 0, 0, XfrmOutStateModeError
	}
	return hl, nh, CounterNone
}

// fitSeal checks that p.Buf has room for the ESP packet around the payload
// that follows hdrLen bytes of header at p.Off, and narrows p.Off and
// p.Len to that payload.
func (s *SA) fitSeal(p *Packet, hdrLen int) Counter {
	t := s.t
	if p.Off < 0 || p.Len < hdrLen || p.Off+p.Len > len(p.Buf) {
		return XfrmOutError
	}
	payloadOff := p.Off + hdrLen
	payloadLen := p.Len - hdrLen
	if payloadOff < esp.HeaderLen+t.ivLen {
		return XfrmOutError
	}
	if len(p.Buf)-(payloadOff+payloadLen) < padFor(t, payloadLen)+esp.TrailerLen+t.icvWrite {
		return XfrmOutError
	}
	p.Off, p.Len = payloadOff, payloadLen
	return CounterNone
}

// sealOne writes header, IV, trailer and ICV around the payload at
// Buf[Off:Off+Len] and seals it; with plain, the payload is read from
// plain (which has room for the trailer behind it) instead, and only the
// ciphertext is written to Buf.
func (s *SA) sealOne(t *transform, p *Packet, seq uint64, plain []byte) {
	start := p.Off - esp.HeaderLen - t.ivLen
	trailerOff := p.Off + p.Len
	pad := padFor(t, p.Len)
	end := trailerOff + pad + esp.TrailerLen + t.icvLen
	b := esp.ESP(p.Buf[start:end])
	b.SetSPI(s.cfg.SPI)
	b.SetSeq(uint32(seq))
	iv := b.IV(t.ivLen)
	switch {
	case s.ivHook != nil:
		s.ivHook(seq, iv)
	case t.ivLen == 8:
		binary.BigEndian.PutUint64(iv, seq)
	case t.ivLen > 0:
		rand.Read(iv)
	}
	if plain == nil {
		plain = p.Buf[p.Off:trailerOff]
	}
	plain = plain[:p.Len+pad+esp.TrailerLen]
	esp.WriteTrailer(plain[p.Len:], p.Proto)
	t.seal(&p.scratch, b, plain, seq, s.esn)
	p.Off, p.Len = start, len(b)
	p.seq = seq
}
