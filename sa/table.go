package sa

import (
	"encoding/binary"
	"math"
	"net/netip"
	"slices"
)

const numShards = 256

// table is one immutable version of the SAD. Tables and slices reachable
// from it are never written after it is published.
//
// The SPI and if_id indexes are u32tables rather than Go maps: a Go map of
// up to 8 entries skips hashing, so with few SAs per shard lookups were
// faster than with many, and the cost of a lookup depended on the number of
// SAs. A u32table costs the same at every size. The 256 shards keep Add and
// Delete cheap: they copy one shard, not the whole index; a nil shard is
// empty. (Shards held by value, not pointer, would save one load per
// lookup but make the table 24 KB, copied by every change.)
type table struct {
	in    [numShards]*u32table[[]*SA] // inbound SAs by SPI (usually one)
	out   [numShards]*u32table[[]*SA] // outbound SAs by SPI
	iface [numShards]*u32table[*iface]
	// iface0 is the interface of if_id 0, which a u32table cannot hold.
	// The daemon refuses if_id 0, but the SAD does not.
	iface0 *iface
	// policies in the order added, for Policies.
	policies []Policy
	n        int // number of SAs
}

// ifaceOf returns the interface of id, or nil.
func (t *table) ifaceOf(id uint32) *iface {
	if id == 0 {
		return t.iface0
	}
	return t.iface[shardOf(id)].lookup(id)
}

// setIface makes f the interface of id in t, a table not yet published,
// copying the one shard it changes.
func (t *table) setIface(id uint32, f *iface) {
	if id == 0 {
		t.iface0 = f
		return
	}
	sh := shardOf(id)
	m := t.iface[sh].clone()
	m.set(id, f)
	t.iface[sh] = m
}

// shard returns (*m)[sh] for writing, creating it if it is nil: only for a
// table being built, whose shards are not yet published.
func shard[V any](m *[numShards]*u32table[V], sh uint32) *u32table[V] {
	if m[sh] == nil {
		m[sh] = new(u32table[V])
	}
	return m[sh]
}

// iface is what one if_id has: its outbound SAs with their selector index,
// and its policies. Immutable once published.
type iface struct {
	outSAs []*SA // in the order added
	outPol []Policy
	inPol  []Policy
	// outAcq is the acquire rate limit of each outPol (acquire.go); the
	// pointers live across table versions, as long as their policy.
	outAcq []*acquireState

	// anyDst: outbound SAs whose selector has no destination prefix,
	// newest first.
	anyDst []*SA
	v4, v6 lpm
}

// lpm finds the outbound SAs of the longest matching destination prefix:
// a table per distinct prefix length, tried longest first.
type lpm struct {
	levels []lpmLevel // longest prefix first
}

// lpmLevel holds the SAs whose selector's destination prefix is bits long,
// by the prefixKey of the prefix. Different prefixes may share a key (an
// IPv6 prefix is folded into 32 bits): their SAs share a list, newest
// first, and pick skips those whose prefix does not contain the
// destination. Two prefixes of one length never both contain an address,
// so the list order among the SAs that match stays newest first.
type lpmLevel struct {
	bits int
	sas  u32table[[]*SA]
}

// v4Key is the prefixKey of the bits-long prefix of the IPv4 address a.
func v4Key(a uint32, bits int) uint32 {
	return nonZeroKey(a &^ (math.MaxUint32 >> bits))
}

// v6Key is the prefixKey of the bits-long prefix of the IPv6 address
// hi:lo, its 128 bits folded into 32.
func v6Key(hi, lo uint64, bits int) uint32 {
	if bits < 64 {
		hi &^= math.MaxUint64 >> bits
		lo = 0
	} else {
		lo &^= math.MaxUint64 >> (bits - 64)
	}
	x := hi*0x9E3779B97F4A7C15 + lo
	return nonZeroKey(uint32(x>>32 ^ x))
}

// nonZeroKey moves key 0, which a u32table cannot hold, to 1: the two
// share a list, which pick sorts out.
func nonZeroKey(k uint32) uint32 {
	if k == 0 {
		return 1
	}
	return k
}

// prefixKey is the lpmLevel key of p: its masked address, an IPv6 one
// folded into 32 bits, with 0 moved to 1.
func prefixKey(p netip.Prefix) uint32 {
	if p.Addr().Is4() {
		a := p.Addr().As4()
		return v4Key(binary.BigEndian.Uint32(a[:]), p.Bits())
	}
	a := p.Addr().As16()
	return v6Key(binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:]), p.Bits())
}

func shardOf(k uint32) uint32 { return (k ^ k>>8 ^ k>>16 ^ k>>24) & (numShards - 1) }

// each calls fn for every SA of t.
func (t *table) each(fn func(*SA)) {
	for i := range t.in {
		for _, list := range t.in[i].all() {
			for _, s := range list {
				fn(s)
			}
		}
		for _, list := range t.out[i].all() {
			for _, s := range list {
				fn(s)
			}
		}
	}
}

func (t *table) bySPI(dir Dir) *[numShards]*u32table[[]*SA] {
	if dir == DirIn {
		return &t.in
	}
	return &t.out
}

// remove takes s out of t, a copy of a published table, copying the shard
// and interface it changes. s must be in t.
func (t *table) remove(s *SA) {
	dir, spi := s.cfg.Dir, s.cfg.SPI
	sh := shardOf(spi)
	list := t.bySPI(dir)[sh].lookup(spi)
	m := t.bySPI(dir)[sh].clone()
	if len(list) == 1 {
		m.delete(spi)
	} else {
		m.set(spi, slices.DeleteFunc(slices.Clone(list), func(o *SA) bool { return o == s }))
	}
	t.bySPI(dir)[sh] = m
	if dir == DirOut {
		f := t.cloneIface(s.cfg.IfID)
		f.outSAs = slices.DeleteFunc(f.outSAs, func(o *SA) bool { return o == s })
		f.index()
	}
	t.n--
}

// cloneIface gives t (a copy of a published table) a private copy of the
// shard and iface of id, creating them if needed, and returns the iface.
func (t *table) cloneIface(id uint32) *iface {
	f := &iface{}
	if old := t.ifaceOf(id); old != nil {
		f.outSAs = slices.Clone(old.outSAs)
		f.outPol = slices.Clone(old.outPol)
		f.outAcq = slices.Clone(old.outAcq)
		f.inPol = slices.Clone(old.inPol)
		f.anyDst, f.v4, f.v6 = old.anyDst, old.v4, old.v6
	}
	t.setIface(id, f)
	return f
}

// index rebuilds the selector index from outSAs. Each list it makes is
// newest first by add time (Linux's curlft.add_time, which pick compares),
// SAs added at the same instant by their order in outSAs, later first: an
// SA kept across a reload keeps its add time wherever the file lists it.
func (f *iface) index() {
	f.anyDst = nil
	f.v4, f.v6 = lpm{}, lpm{}
	byAge := slices.Clone(f.outSAs)
	slices.SortStableFunc(byAge, func(a, b *SA) int { return a.added.Compare(b.added) })
	for i := len(byAge) - 1; i >= 0; i-- { // newest first
		s := byAge[i]
		if ts := s.cfg.Selector.TS; ts != nil {
			// Under every prefix of every destination range: pick
			// then checks the whole set.
			for k := range ts.Dst {
				ts.Dst[k].eachPrefix(func(p netip.Prefix) bool { f.indexAt(s, p); return true })
			}
			continue
		}
		dst := s.cfg.Selector.Dst
		if !dst.IsValid() {
			f.anyDst = append(f.anyDst, s)
			continue
		}
		f.indexAt(s, dst)
	}
	for _, l := range []*lpm{&f.v4, &f.v6} {
		slices.SortFunc(l.levels, func(a, b lpmLevel) int { return b.bits - a.bits })
	}
}

// indexAt adds s, the newest SA so far, to the list of destination prefix
// dst. An SA whose ranges give it two prefixes that share a list (a
// folded IPv6 key) is in it once.
func (f *iface) indexAt(s *SA, dst netip.Prefix) {
	l := &f.v6
	if dst.Addr().Is4() {
		l = &f.v4
	}
	j := slices.IndexFunc(l.levels, func(lv lpmLevel) bool { return lv.bits == dst.Bits() })
	if j < 0 {
		j = len(l.levels)
		l.levels = append(l.levels, lpmLevel{bits: dst.Bits()})
	}
	m := &l.levels[j].sas
	k := prefixKey(dst)
	list := m.lookup(k)
	if len(list) > 0 && list[len(list)-1] == s {
		return
	}
	m.set(k, append(list, s))
}
