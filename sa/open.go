package sa

import (
	"github.com/ipsecd/ipsecd/internal/iphdr"
	"github.com/ipsecd/ipsecd/sa/esp"
	"github.com/ipsecd/ipsecd/sa/replay"
)

// OpenBatch verifies and decrypts a batch of ESP packets of this (inbound)
// SA, in place.
//
// On entry each packet's Buf[Off:Off+Len] is an ESP packet, SPI to ICV. On
// return, for a packet with Drop == CounterNone, Buf[Off:Off+Len] is the
// inner IP packet: in tunnel mode the packet that was carried, in transport
// mode the payload behind a rebuilt IPv4 (20-byte) or IPv6 (40-byte) header
// from the SA's outer Src (the peer) to its Dst (us), so Off must leave room
// for it (Headroom does). The rebuilt header describes a whole datagram:
// its length is the payload's, the IPv4 id, flags and fragment offset are
// 0, and no IPv6 fragment header follows it. Proto is the next header.
//
// Drops, each counted once in the SA's Counters:
//   - XfrmInHdrError: shorter than header, IV, trailer and ICV, or the
//     encrypted part not a multiple of the suite's alignment;
//   - XfrmInNoStates: the SPI is not this SA's; XfrmInStateDirError: an
//     outbound SA;
//   - XfrmInStateMismatch, before anything else is looked at: the packet
//     arrived in another encapsulation than the SA's (Packet.UDP set for a
//     raw-ESP SA, or clear for an ESP-in-UDP one), as Linux's xfrm_input
//     refuses an encap_type other than the state's;
//   - XfrmInStateExpired: hard lifetime reached;
//   - XfrmInStateSeqError: replayed (per SA: Replay) or left of the window
//     (per SA: ReplayWindow);
//   - XfrmInStateProtoError: the ICV did not verify (per SA:
//     IntegrityFailed), or, after it verified, the padding is not 1, 2,
//     3, ... or the pad length runs past the payload (Linux counts a bad
//     trailer, esp_remove_trailer's -EINVAL, here too);
//   - XfrmInStateModeError: tunnel mode with a next header other than 4/41,
//     or one that does not match the inner version; transport mode with
//     a payload the rebuilt header would misdescribe (the package doc's
//     "Modes"), or one too long for the rebuilt header's 16-bit length;
//   - XfrmInBufferError: transport mode without room for the rebuilt header;
//   - XfrmInStateMismatch, after the window advanced (as Linux's
//     __xfrm_policy_check, which runs after xfrm_input): the inner
//     packet's addresses are outside the SA's selector (RFC 4301 §5.2). In
//     transport mode they are the rebuilt header's, the SA's outer
//     addresses. A selector with neither prefix set admits all. A TSSet
//     (IKE's traffic selectors) needs a source in one of its Src and a
//     destination in one of its Dst, each with its protocol and ports; a
//     port range admits no packet whose ports cannot be read (a
//     fragment, a protocol without ports).
//
// A next header 59 packet (RFC 4303 §2.6) advances the window and is then
// dropped silently: Drop = DroppedDummy, counted nowhere.
//
// The replay window is peeked at before decryption without a lock,
// decryption runs with no lock held, and the SA's lock is then taken once
// for the batch to re-check and advance the window and count the packets
// (docs/design.md, lesson 1). OpenBatch allocates nothing.
func (s *SA) OpenBatch(pkts []Packet) {
	if !s.enter() { // removed from its SAD and wiped (retire.go)
		s.dropInvalid(pkts, XfrmInStateInvalid)
		return
	}
	defer s.exit()
	t := s.t
	dropAll := CounterNone
	switch {
	case s.cfg.Dir != DirIn:
		dropAll = XfrmInStateDirError
	case s.hardExpired.Load():
		dropAll = XfrmInStateExpired
	}

	// Stage 1, no lock: parse, peek at the window, decrypt.
	good := 0
	for i := range pkts {
		p := &pkts[i]
		p.SA, p.Proto, p.seq = s, 0, 0
		p.Drop = dropAll
		if dropAll == CounterNone {
			p.Drop = s.decrypt(t, p)
		}
		if p.Drop != CounterNone {
			s.counters.Inc(p.Drop)
			continue
		}
		good++
	}
	if good == 0 {
		return
	}

	// Stage 2, one critical section: advance the window, count, lifetimes.
	// Events wait until the lock is released.
	limits := s.hasCountLimits()
	var soft, hard string
	s.mu.Lock()
	for i := range pkts {
		p := &pkts[i]
		if p.Drop != CounterNone {
			continue
		}
		if s.hardExpired.Load() {
			p.Drop = XfrmInStateExpired
			s.counters.Inc(p.Drop)
			continue
		}
		// As Linux's xfrm_input, the hard limits are checked before the
		// window advances and the packet is counted.
		if limits {
			if hr := s.hardLimit(s.bytes.Load(), s.packets.Load()); hr != "" {
				hard = hr
				p.Drop = XfrmInStateExpired
				s.counters.Inc(p.Drop)
				continue
			}
		}
		switch s.window.Advance(p.seq) {
		case replay.OK:
		case replay.Duplicate:
			s.replay.Add(1)
			p.Drop = XfrmInStateSeqError
			s.counters.Inc(p.Drop)
			continue
		default:
			s.replayWindow.Add(1)
			p.Drop = XfrmInStateSeqError
			s.counters.Inc(p.Drop)
			continue
		}
		n := uint64(p.Len)
		bytesAfter := s.bytes.Add(n)
		pktsAfter := s.packets.Add(1)
		if limits {
			if sr := s.softLimit(bytesAfter, pktsAfter); sr != "" {
				soft = sr
			}
		}
	}
	s.mu.Unlock()
	s.raise(soft, hard)

	// Stage 3, no lock: dummy packets, mode checks, transport header.
	for i := range pkts {
		p := &pkts[i]
		if p.Drop != CounterNone {
			continue
		}
		p.Drop = s.decapsulate(p)
		s.counters.Inc(p.Drop) // CounterNone and DroppedDummy count nowhere
	}
}

// decrypt runs stage 1 for one packet: on success Buf[Off:Off+Len] is the
// payload (without padding), Proto the next header and seq the sequence
// number.
func (s *SA) decrypt(t *transform, p *Packet) Counter {
	if p.Off < 0 || p.Len < 0 || p.Off+p.Len > len(p.Buf) || (p.Src != nil && len(p.Src) != p.Len) {
		return XfrmInHdrError
	}
	b := esp.ESP(p.Buf[p.Off : p.Off+p.Len]) // where the plaintext goes
	src := esp.ESP(p.ESP())                  // where the packet is read from: b, or Src
	if !src.IsValid(t.ivLen, t.icvLen, t.align) {
		return XfrmInHdrError
	}
	if src.SPI() != s.cfg.SPI {
		return XfrmInNoStates
	}
	if p.UDP != (s.cfg.Encap != nil) {
		return XfrmInStateMismatch
	}
	seq, v := s.window.Check(src.Seq())
	switch v {
	case replay.OK:
	case replay.Duplicate:
		s.replay.Add(1)
		return XfrmInStateSeqError
	default:
		s.replayWindow.Add(1)
		return XfrmInStateSeqError
	}
	if !t.openFrom(&p.scratch, src, b, seq, s.esn) {
		s.integrityFailed.Add(1)
		return XfrmInStateProtoError
	}
	plain := b.Encrypted(t.ivLen, t.icvLen)
	n, nh, ok := esp.ParseTrailer(plain)
	if !ok {
		return XfrmInStateProtoError
	}
	p.Off += esp.HeaderLen + t.ivLen
	p.Len = n
	p.Proto = nh
	p.seq = seq
	return CounterNone
}

// decapsulate runs stage 3 for one packet that passed the window.
func (s *SA) decapsulate(p *Packet) Counter {
	if p.Proto == esp.NextHeaderDummy {
		return DroppedDummy
	}
	data := p.Buf[p.Off : p.Off+p.Len]
	if s.cfg.Mode == ModeTunnel {
		nh, ok := tunnelNextHeader(data)
		if !ok || nh != p.Proto {
			return XfrmInStateModeError
		}
		if !s.cfg.Selector.admitsPacket(data) {
			return XfrmInStateMismatch
		}
		return CounterNone
	}
	src, dst := s.cfg.Src, s.cfg.Dst
	if !s.cfg.Selector.admitsTransport(src, dst, p.Proto, data) {
		return XfrmInStateMismatch
	}
	v4 := src.Is4()
	hl, maxLen := iphdr.IPv6Len, 0xffff // the IPv6 payload length
	if v4 {
		hl, maxLen = iphdr.IPv4MinLen, 0xffff-iphdr.IPv4MinLen // the IPv4 total length
	}
	if p.Len > maxLen || !transportPayload(!v4, p.Proto, data) {
		return XfrmInStateModeError
	}
	if p.Off < hl {
		return XfrmInBufferError
	}
	h := p.Buf[p.Off-hl : p.Off]
	if v4 {
		iphdr.IPv4(h).Encode(src, dst, p.Proto, rebuiltTTL, p.Len)
	} else {
		iphdr.IPv6(h).Encode(src, dst, p.Proto, rebuiltTTL, p.Len)
	}
	p.Off -= hl
	p.Len += hl
	return CounterNone
}
