package sa

import (
	"encoding/binary"
	"math"
	"net/netip"
	"slices"
)

// The outbound selector index of an interface: which of its SAs seals a
// packet to a destination (LookupOut). It is built whole by Replace and
// changed SA by SA by the SAD's other changes, which copy only the lists
// and shards that the SA is in.

// iface is what one if_id has: the selector index of its outbound SAs,
// and its policies. Immutable once published.
type iface struct {
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
// so the list order among the SAs that match stays newest first. The
// level is sharded, so that one road warrior's /32 joining 10,000 others
// copies one shard of them.
type lpmLevel struct {
	bits int
	keys int // keys in sas; a level without is dropped
	sas  *shards[[]*SA]
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

// eachDst calls fn with each destination prefix s is indexed under: its
// selector's destination, or every prefix of every destination range of
// its TSSet (pick then checks the whole set); none for an SA without a
// destination, which goes in anyDst.
func eachDst(s *SA, fn func(netip.Prefix)) {
	if ts := s.cfg.Selector.TS; ts != nil {
		for k := range ts.Dst {
			ts.Dst[k].eachPrefix(func(p netip.Prefix) bool { fn(p); return true })
		}
		return
	}
	if dst := s.cfg.Selector.Dst; dst.IsValid() {
		fn(dst)
	}
}

// noDst reports whether s goes in anyDst rather than under prefixes.
func noDst(s *SA) bool { return s.cfg.Selector.TS == nil && !s.cfg.Selector.Dst.IsValid() }

// buildIndex builds f's selector index from out, its outbound SAs in the
// order added, for a table no reader sees yet. Each list it makes is
// newest first by add time (Linux's curlft.add_time, which pick
// compares), SAs added at the same instant by their order in out, later
// first: an SA kept across a reload keeps its add time wherever the file
// lists it.
func (f *iface) buildIndex(out []*SA) {
	byAge := slices.Clone(out)
	slices.SortStableFunc(byAge, func(a, b *SA) int { return a.added.Compare(b.added) })
	levels := map[*shards[[]*SA]]*shardsWriter[[]*SA]{}
	for i := len(byAge) - 1; i >= 0; i-- { // newest first
		s := byAge[i]
		if noDst(s) {
			f.anyDst = append(f.anyDst, s)
			continue
		}
		eachDst(s, func(p netip.Prefix) {
			l := f.lpmOf(p)
			j := l.level(p.Bits())
			lv := &l.levels[j]
			w := levels[lv.sas]
			if w == nil {
				w = writer(lv.sas) // of new shards: written in place
				levels[lv.sas] = w
			}
			k := prefixKey(p)
			list := lv.sas.lookup(k)
			if len(list) > 0 && list[len(list)-1] == s {
				return // a second prefix of s under a shared key
			}
			if len(list) == 0 {
				lv.keys++
			}
			w.set(k, append(list, s))
		})
	}
}

func (f *iface) lpmOf(p netip.Prefix) *lpm {
	if p.Addr().Is4() {
		return &f.v4
	}
	return &f.v6
}

// level returns the index of l's level of bits, adding an empty one (in
// place) when there is none, longest first.
func (l *lpm) level(bits int) int {
	j, found := l.find(bits)
	if !found {
		l.levels = slices.Insert(l.levels, j, lpmLevel{bits: bits, sas: new(shards[[]*SA])})
	}
	return j
}

// find returns the index of l's level of bits, or where it would go.
func (l *lpm) find(bits int) (int, bool) {
	return slices.BinarySearchFunc(l.levels, bits, func(lv lpmLevel, bits int) int { return bits - lv.bits })
}

// ifaceWriter changes the copy of a published iface that a tableChange
// made: it copies each slice and index level it writes once per change.
type ifaceWriter struct {
	f                  *iface
	v4Copied, v6Copied bool
	// levels are the level tables copied so far, with their writers.
	levels map[*shards[[]*SA]]*shardsWriter[[]*SA]
}

// lpmOf returns f's lpm of p's family for writing.
func (w *ifaceWriter) lpmOf(p netip.Prefix) *lpm {
	l, copied := w.f.lpmOf(p), &w.v4Copied
	if !p.Addr().Is4() {
		copied = &w.v6Copied
	}
	if !*copied {
		l.levels = slices.Clone(l.levels)
		*copied = true
	}
	return l
}

// levelWriter returns the writer of level j of l, copying its table on
// the first write of the change.
func (w *ifaceWriter) levelWriter(l *lpm, j int) *shardsWriter[[]*SA] {
	lv := &l.levels[j]
	if sw := w.levels[lv.sas]; sw != nil {
		return sw
	}
	c := *lv.sas
	lv.sas = &c
	sw := writer(&c)
	w.levels[&c] = sw
	return sw
}

// insertOut adds s, an outbound SA, to the index: before the SAs added
// at its instant or before it in each list (as buildIndex orders them,
// s being the last of the interface's SAs).
func (w *ifaceWriter) insertOut(s *SA) {
	if noDst(s) {
		w.f.anyDst = insertNewest(w.f.anyDst, s)
		return
	}
	eachDst(s, func(p netip.Prefix) {
		l := w.lpmOf(p)
		j := l.level(p.Bits())
		sw := w.levelWriter(l, j)
		k := prefixKey(p)
		list := l.levels[j].sas.lookup(k)
		if slices.Contains(list, s) {
			return // a second prefix of s under a shared key
		}
		if len(list) == 0 {
			l.levels[j].keys++
		}
		sw.set(k, insertNewest(list, s))
	})
}

// removeOut takes s, an outbound SA in the index, out of it, and drops
// the levels it leaves empty.
func (w *ifaceWriter) removeOut(s *SA) {
	if noDst(s) {
		w.f.anyDst = without(w.f.anyDst, s)
		return
	}
	eachDst(s, func(p netip.Prefix) {
		l := w.lpmOf(p)
		j, found := l.find(p.Bits())
		k := prefixKey(p)
		if !found || !slices.Contains(l.levels[j].sas.lookup(k), s) {
			return // removed under an earlier prefix with a shared key
		}
		sw := w.levelWriter(l, j)
		list := without(l.levels[j].sas.lookup(k), s)
		if len(list) != 0 {
			sw.set(k, list)
			return
		}
		sw.delete(k)
		if l.levels[j].keys--; l.levels[j].keys == 0 {
			l.levels = slices.Delete(l.levels, j, j+1)
		}
	})
}

// insertNewest returns a copy of list, newest first, with s before every
// SA added at its instant or earlier.
func insertNewest(list []*SA, s *SA) []*SA {
	i := slices.IndexFunc(list, func(o *SA) bool { return !o.added.After(s.added) })
	if i < 0 {
		i = len(list)
	}
	out := make([]*SA, 0, len(list)+1)
	out = append(out, list[:i]...)
	out = append(out, s)
	return append(out, list[i:]...)
}
