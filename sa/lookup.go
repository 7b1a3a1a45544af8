package sa

import (
	"encoding/binary"
	"net/netip"

	"github.com/ipsecd/ipsecd/sa/esp"
)

// LookupIn returns the inbound SA with spi and outer destination dst (an
// invalid dst matches any), or nil. It takes no lock and allocates nothing.
func (d *SAD) LookupIn(spi uint32, dst netip.Addr) *SA {
	list := d.table.Load().in[shardOf(spi)].lookup(spi)
	for _, s := range list {
		if s.matchDst(dst) {
			return s
		}
	}
	return nil
}

// LookupOut returns the SA that seals pkt, a cleartext IP packet read from
// the interface with ifID, or nil and the counter the drop was counted in
// (already incremented: the caller only drops the packet):
// XfrmOutPolBlock when the interface's outbound policies block it (the
// first that matches decides; when it has policies and none matches, the
// packet is blocked), XfrmOutNoStates when no SA of the interface covers
// it, XfrmOutError when pkt is not an IP packet.
//
// Among the interface's SAs, the one whose selector's destination prefix is
// longest wins (an SA with a TSSet counts under each prefix of its
// destination ranges, and must then hold the packet's source, protocol
// and ports too); then SAs without a destination prefix. Among equals, as in
// Linux: never a hard-expired SA; a live SA before a dying (soft-expired)
// one; the newest first (see pick). The cost is one hash lookup per distinct
// prefix length of the interface, the same whatever the number of SAs,
// interfaces or prefixes; it takes no lock and allocates nothing.
func (d *SAD) LookupOut(ifID uint32, pkt []byte) (*SA, Counter) {
	s, c := d.lookupOut(ifID, pkt)
	d.counters.Inc(c)
	return s, c
}

// LookupOutSegments is LookupOut for the n segments of one super-packet,
// whose first segment's headers are pkt: they share addresses, so one
// lookup finds the SA of all of them, and a drop is counted n times, as n
// calls of LookupOut would count it.
func (d *SAD) LookupOutSegments(ifID uint32, pkt []byte, n int) (*SA, Counter) {
	s, c := d.lookupOut(ifID, pkt)
	d.counters.add(c, uint64(n))
	return s, c
}

func (d *SAD) lookupOut(ifID uint32, pkt []byte) (*SA, Counter) {
	src, dst, ok := innerAddrs(pkt)
	if !ok {
		return nil, XfrmOutError
	}
	f := d.table.Load().ifaceOf(ifID)
	if f == nil {
		return nil, XfrmOutNoStates
	}
	pol := -1 // the out policy that lets the packet through
	if len(f.outPol) != 0 {
		if pol = firstMatch(f.outPol, src, dst); pol < 0 || f.outPol[pol].Action != ActionAllow {
			return nil, XfrmOutPolBlock
		}
	}
	if dst.Is4() {
		a4 := dst.As4()
		a := binary.BigEndian.Uint32(a4[:])
		for i := range f.v4.levels {
			lv := &f.v4.levels[i]
			if s := pick(lv.sas.lookup(v4Key(a, lv.bits)), pkt, src, dst); s != nil {
				return s, CounterNone
			}
		}
	} else {
		a16 := dst.As16()
		hi, lo := binary.BigEndian.Uint64(a16[:8]), binary.BigEndian.Uint64(a16[8:])
		for i := range f.v6.levels {
			lv := &f.v6.levels[i]
			if s := pick(lv.sas.lookup(v6Key(hi, lo, lv.bits)), pkt, src, dst); s != nil {
				return s, CounterNone
			}
		}
	}
	if s := pick(f.anyDst, pkt, src, dst); s != nil {
		return s, CounterNone
	}
	if pol >= 0 {
		d.acquireFor(f, pol, src, dst)
	}
	return nil, XfrmOutNoStates
}

// pick returns the SA of list that seals a packet from src to dst. It
// chooses as Linux's xfrm_state_look_at (net/xfrm/xfrm_state.c) does among
// the states that could serve a flow: only valid states count, so a
// hard-expired SA is never picked (Linux: XFRM_STATE_EXPIRED, the lookup
// fails); among valid ones a state that is not dying (no soft expiry)
// beats a dying one, and among equals the newest add time wins. list is
// newest first (index), so the first live SA wins, else the first dying
// one.
func pick(list []*SA, pkt []byte, src, dst netip.Addr) *SA {
	var dying *SA
	for _, s := range list {
		if !s.covers(pkt, src, dst) || s.hardExpired.Load() {
			continue
		}
		if !s.softFired.Load() {
			return s
		}
		if dying == nil {
			dying = s
		}
	}
	return dying
}

// OpenBatch opens a batch of ESP packets from the underlay: per packet it
// reads the SPI, finds the inbound SA by SPI alone (Add refuses a second
// inbound SA with a taken SPI), and opens runs of consecutive packets of
// one SA with that SA's OpenBatch. Then, when the
// SA's interface has inbound policies, the inner packet must match an
// allowing one (XfrmInPolBlock; XfrmInNoPols when none matches).
// Each drop is counted once; see (*SA).OpenBatch for the others. Packets
// shorter than an ESP header are XfrmInHdrError, unknown SPIs
// XfrmInNoStates. It allocates nothing.
func (d *SAD) OpenBatch(pkts []Packet) {
	t := d.table.Load()
	for i := range pkts {
		pkts[i].SA = d.lookupPacket(t, &pkts[i])
	}
	for i := 0; i < len(pkts); {
		s := pkts[i].SA
		j := i + 1
		if s == nil {
			i = j
			continue
		}
		for j < len(pkts) && pkts[j].SA == s {
			j++
		}
		run := pkts[i:j]
		s.OpenBatch(run)
		if f := t.ifaceOf(s.cfg.IfID); f != nil && len(f.inPol) != 0 {
			for k := range run {
				p := &run[k]
				if p.Drop == CounterNone {
					p.Drop = checkIn(f.inPol, p.Data())
					d.counters.Inc(p.Drop)
				}
			}
		}
		i = j
	}
}

// lookupPacket finds the SA of p; on failure it sets and counts p.Drop.
func (d *SAD) lookupPacket(t *table, p *Packet) *SA {
	p.Proto = 0
	if p.Off < 0 || p.Len < 0 || p.Off+p.Len > len(p.Buf) || (p.Src != nil && len(p.Src) != p.Len) {
		p.Drop = XfrmInHdrError
		d.counters.Inc(p.Drop)
		return nil
	}
	spi, ok := esp.SPIOf(p.ESP())
	if !ok {
		p.Drop = XfrmInHdrError
		d.counters.Inc(p.Drop)
		return nil
	}
	list := t.in[shardOf(spi)].lookup(spi)
	if len(list) == 0 {
		p.Drop = XfrmInNoStates
		d.counters.Inc(p.Drop)
		return nil
	}
	p.Drop = CounterNone
	return list[0]
}
