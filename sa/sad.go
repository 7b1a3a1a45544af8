package sa

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipsecd/ipsecd/sa/esp"
)

// SAD is the security association database with the policies (SPD) of the
// xfrm interfaces: inbound lookup by SPI, outbound lookup by (if_id,
// selector), and the add-time lifetimes.
//
// An SA that leaves the SAD (Delete, Replace, RemoveExpired) is retired:
// it raises no more events, and its keys are zeroed as soon as no worker
// is sealing or opening with it (retire.go).
//
// It is safe for concurrent use. Lookups read an immutable table through an
// atomic pointer and take no lock; changes are serialised by a mutex, copy
// the part of the table they touch (one shard of 256, and one interface's
// entry) and publish a new table. Lookup cost does not grow with the number
// of SAs, interfaces or policies of other interfaces (docs/design.md, lessons 2
// and 4).
type SAD struct {
	counters *Counters
	handler  atomic.Pointer[func(Event)]

	mu sync.Mutex // serialises writers; readers only Load table
	// mu guards: replacing table.
	table atomic.Pointer[table]
}

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

// NewSAD returns an empty SAD that counts drops in counters (nil: counters
// of its own).
func NewSAD(counters *Counters) *SAD {
	if counters == nil {
		counters = new(Counters)
	}
	d := &SAD{counters: counters}
	d.table.Store(&table{})
	return d
}

// Counters returns the SAD's global counters.
func (d *SAD) Counters() *Counters { return d.counters }

// SetEventHandler sets the function that receives SA expiry events (nil:
// none). It is called synchronously, at most once per SA and kind, from the
// goroutine that noticed the limit: a data-path worker sealing or opening,
// or the caller of Tick; never for an SA that has left the SAD. It must
// not block: hand the event to another goroutine (a buffered channel with a
// non-blocking send, for example) and return. On HardExpire, call
// RemoveExpired from that goroutine, as Linux deletes a state whose hard
// lifetime expired.
func (d *SAD) SetEventHandler(fn func(Event)) {
	if fn == nil {
		d.handler.Store(nil)
		return
	}
	d.handler.Store(&fn)
}

// Tick applies the add-time lifetimes at now: soft and hard expiry events
// and stopping hard-expired SAs (RemoveExpired then removes them). It also
// dates the SAs' last use (Stats.LastUsed) to now for those that counted
// packets since the last Tick, so that the data path never reads a clock.
// The daemon calls it every second; it costs O(number of SAs).
func (d *SAD) Tick(now time.Time) {
	d.table.Load().each(func(s *SA) {
		s.noteUse(now)
		s.tick(now)
	})
}

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

// States returns all SAs, ordered by direction, SPI and destination.
func (d *SAD) States() []*SA {
	t := d.table.Load()
	all := make([]*SA, 0, t.n)
	for i := range t.in {
		for _, list := range t.in[i].all() {
			all = append(all, list...)
		}
		for _, list := range t.out[i].all() {
			all = append(all, list...)
		}
	}
	slices.SortFunc(all, func(a, b *SA) int {
		return cmp.Or(cmp.Compare(a.cfg.Dir, b.cfg.Dir), cmp.Compare(a.cfg.SPI, b.cfg.SPI), a.cfg.Dst.Compare(b.cfg.Dst))
	})
	return all
}

// Policies returns all policies in the order they were added.
func (d *SAD) Policies() []Policy {
	return slices.Clone(d.table.Load().policies)
}

// Replace sets the whole content of the SAD: used to load and reload the
// configuration. It checks everything first and changes nothing on error
// (ErrExists for a duplicate SA or policy, ErrInvalidConfig for a bad
// policy, ErrRetired for an SA that has left a SAD). SAs of the SAD that
// states does not hold are retired: their keys are zeroed once no batch
// uses them (retire.go). It costs O(n) and allocates a new table.
func (d *SAD) Replace(states []*SA, policies []Policy) error {
	t := &table{}
	ifaces := map[uint32]*iface{}
	get := func(id uint32) *iface {
		f := ifaces[id]
		if f == nil {
			f = &iface{}
			ifaces[id] = f
		}
		return f
	}
	keep := make(map[*SA]bool, len(states))
	for _, s := range states {
		keep[s] = true
		m := shard(t.bySPI(s.cfg.Dir), shardOf(s.cfg.SPI))
		list := m.lookup(s.cfg.SPI)
		if err := conflict(list, s); err != nil {
			return err
		}
		m.set(s.cfg.SPI, append(list, s))
		if s.cfg.Dir == DirOut {
			f := get(s.cfg.IfID)
			f.outSAs = append(f.outSAs, s)
		}
	}
	for i, p := range policies {
		if err := validatePolicy(p); err != nil {
			return fmt.Errorf("policy %d: %w", i, err)
		}
		f := get(p.IfID)
		if f.hasPolicy(p) {
			return fmt.Errorf("policy %d (dir %s if_id %d %v): %w", i, p.Dir, p.IfID, p.Selector, ErrExists)
		}
		f.addPolicy(p)
	}
	for id, f := range ifaces {
		f.index()
		if id == 0 {
			t.iface0 = f
			continue
		}
		shard(&t.iface, shardOf(id)).set(id, f)
	}
	t.policies = slices.Clone(policies)
	t.n = len(states)

	d.mu.Lock()
	defer d.mu.Unlock()
	// Checked under mu, which every retire of this SAD's SAs holds.
	for _, s := range states {
		if s.Retired() {
			return fmt.Errorf("state %v: %w", s, ErrRetired)
		}
	}
	for _, s := range states {
		s.sad.Store(d)
	}
	old := d.table.Load()
	d.table.Store(t)
	old.each(func(s *SA) {
		if !keep[s] {
			s.retire()
		}
	})
	return nil
}

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

// conflict returns ErrExists when s may not join list, the SAs of its
// direction with its SPI. Outbound SAs are told apart by SPI and outer
// destination. Inbound ones by SPI alone: OpenBatch finds them from the
// ESP header, without the outer destination address (RFC 4301 §4.1 lets
// a receiver that chooses its SPIs, as IKE does, use the SPI alone).
func conflict(list []*SA, s *SA) error {
	for _, o := range list {
		switch {
		case o.cfg.Dst == s.cfg.Dst:
			return fmt.Errorf("state %v: %w", s, ErrExists)
		case s.cfg.Dir == DirIn:
			return fmt.Errorf("state %v: inbound SPI %#08x is taken by the SA to %v (inbound SAs are found by SPI alone): %w",
				s, s.cfg.SPI, o.cfg.Dst, ErrExists)
		}
	}
	return nil
}

// Add puts s into the SAD. An outbound SA with the same SPI and outer
// destination, or an inbound SA with the same SPI, is refused with
// ErrExists (see conflict). Among outbound SAs with the same
// if_id and selector, the newest that is not dying is used
// (make-before-break rekeying; see LookupOut). An SA that has left a SAD is
// refused with ErrRetired.
func (d *SAD) Add(s *SA) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s.Retired() {
		return fmt.Errorf("state %v: %w", s, ErrRetired)
	}
	old := d.table.Load()
	sh := shardOf(s.cfg.SPI)
	list := old.bySPI(s.cfg.Dir)[sh].lookup(s.cfg.SPI)
	if err := conflict(list, s); err != nil {
		return err
	}
	t := *old
	m := old.bySPI(s.cfg.Dir)[sh].clone()
	m.set(s.cfg.SPI, append(slices.Clip(list), s))
	t.bySPI(s.cfg.Dir)[sh] = m
	if s.cfg.Dir == DirOut {
		f := t.cloneIface(s.cfg.IfID)
		f.outSAs = append(f.outSAs, s)
		f.index()
	}
	t.n++
	s.sad.Store(d)
	d.table.Store(&t)
	return nil
}

// Delete removes the SA with dir, spi and outer destination dst (invalid:
// the first with that SPI). ErrNotFound if there is none. The SA is
// retired: its keys are zeroed once no batch uses it (retire.go).
func (d *SAD) Delete(dir Dir, spi uint32, dst netip.Addr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	old := d.table.Load()
	list := old.bySPI(dir)[shardOf(spi)].lookup(spi)
	i := slices.IndexFunc(list, func(s *SA) bool { return s.matchDst(dst) })
	if i < 0 {
		return fmt.Errorf("state spi 0x%08x dir %s dst %v: %w", spi, dir, dst, ErrNotFound)
	}
	victim := list[i]
	t := *old
	t.remove(victim)
	d.table.Store(&t)
	victim.retire()
	return nil
}

// RemoveExpired removes every hard-expired SA from the SAD in one table
// change, retires them (their keys are zeroed once no batch uses them) and
// returns them; nil when there is none. The daemon calls it when an SA
// raises HardExpire, and once a second in case an event was lost. It costs
// O(number of SAs).
func (d *SAD) RemoveExpired() []*SA {
	d.mu.Lock()
	defer d.mu.Unlock()
	old := d.table.Load()
	var dead []*SA
	old.each(func(s *SA) {
		if s.hardExpired.Load() {
			dead = append(dead, s)
		}
	})
	if len(dead) == 0 {
		return nil
	}
	t := *old
	for _, s := range dead {
		t.remove(s)
	}
	d.table.Store(&t)
	for _, s := range dead {
		s.retire()
	}
	slices.SortFunc(dead, func(a, b *SA) int {
		return cmp.Or(cmp.Compare(a.cfg.Dir, b.cfg.Dir), cmp.Compare(a.cfg.SPI, b.cfg.SPI), a.cfg.Dst.Compare(b.cfg.Dst))
	})
	return dead
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

// AddPolicy appends p to its interface's policies. A policy with the same
// direction, if_id and selector is refused with ErrExists.
func (d *SAD) AddPolicy(p Policy) error {
	if err := validatePolicy(p); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	old := d.table.Load()
	if f := old.ifaceOf(p.IfID); f != nil && f.hasPolicy(p) {
		return fmt.Errorf("policy dir %s if_id %d %v: %w", p.Dir, p.IfID, p.Selector, ErrExists)
	}
	t := *old
	f := t.cloneIface(p.IfID)
	f.addPolicy(p)
	t.policies = append(slices.Clip(old.policies), p)
	d.table.Store(&t)
	return nil
}

// DeletePolicy removes the policy with p's direction, if_id and selector
// (its action is ignored). ErrNotFound if there is none.
func (d *SAD) DeletePolicy(p Policy) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	old := d.table.Load()
	same := func(q Policy) bool { return q.Dir == p.Dir && q.IfID == p.IfID && q.Selector == p.Selector }
	i := slices.IndexFunc(old.policies, same)
	if i < 0 {
		return fmt.Errorf("policy dir %s if_id %d %v: %w", p.Dir, p.IfID, p.Selector, ErrNotFound)
	}
	t := *old
	t.policies = slices.Delete(slices.Clone(old.policies), i, i+1)
	f := t.cloneIface(p.IfID)
	f.outPol = slices.DeleteFunc(f.outPol, same)
	f.inPol = slices.DeleteFunc(f.inPol, same)
	d.table.Store(&t)
	return nil
}

// cloneIface gives t (a copy of a published table) a private copy of the
// shard and iface of id, creating them if needed, and returns the iface.
func (t *table) cloneIface(id uint32) *iface {
	f := &iface{}
	if old := t.ifaceOf(id); old != nil {
		f.outSAs = slices.Clone(old.outSAs)
		f.outPol = slices.Clone(old.outPol)
		f.inPol = slices.Clone(old.inPol)
		f.anyDst, f.v4, f.v6 = old.anyDst, old.v4, old.v6
	}
	t.setIface(id, f)
	return f
}

func validatePolicy(p Policy) error {
	if p.Dir != DirIn && p.Dir != DirOut {
		return fieldErr("dir", "want in or out")
	}
	if p.Action != ActionAllow && p.Action != ActionBlock {
		return fieldErr("action", "want allow or block")
	}
	return validateSelector("src", p.Selector)
}

func (f *iface) hasPolicy(p Policy) bool {
	list := f.outPol
	if p.Dir == DirIn {
		list = f.inPol
	}
	return slices.ContainsFunc(list, func(q Policy) bool { return q.Selector == p.Selector })
}

func (f *iface) addPolicy(p Policy) {
	if p.Dir == DirIn {
		f.inPol = append(f.inPol, p)
	} else {
		f.outPol = append(f.outPol, p)
	}
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
		dst := s.cfg.Selector.Dst
		if !dst.IsValid() {
			f.anyDst = append(f.anyDst, s)
			continue
		}
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
		m.set(k, append(m.lookup(k), s))
	}
	for _, l := range []*lpm{&f.v4, &f.v6} {
		slices.SortFunc(l.levels, func(a, b lpmLevel) int { return b.bits - a.bits })
	}
}

// matchPrefix: an invalid prefix matches any address.
func matchPrefix(p netip.Prefix, a netip.Addr) bool {
	return !p.IsValid() || p.Contains(a)
}

func (sel *Selector) match(src, dst netip.Addr) bool {
	return matchPrefix(sel.Src, src) && matchPrefix(sel.Dst, dst)
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
// longest wins; then SAs without a destination prefix. Among equals, as in
// Linux: never a hard-expired SA; a live SA before a dying (soft-expired)
// one; the newest first (see pick). The cost is one hash lookup per distinct
// prefix length of the interface, the same whatever the number of SAs,
// interfaces or prefixes; it takes no lock and allocates nothing.
func (d *SAD) LookupOut(ifID uint32, pkt []byte) (*SA, Counter) {
	s, c := d.lookupOut(ifID, pkt)
	d.counters.Inc(c)
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
	if len(f.outPol) != 0 && !allowed(f.outPol, src, dst) {
		return nil, XfrmOutPolBlock
	}
	if dst.Is4() {
		a4 := dst.As4()
		a := binary.BigEndian.Uint32(a4[:])
		for i := range f.v4.levels {
			lv := &f.v4.levels[i]
			if s := pick(lv.sas.lookup(v4Key(a, lv.bits)), src, dst); s != nil {
				return s, CounterNone
			}
		}
	} else {
		a16 := dst.As16()
		hi, lo := binary.BigEndian.Uint64(a16[:8]), binary.BigEndian.Uint64(a16[8:])
		for i := range f.v6.levels {
			lv := &f.v6.levels[i]
			if s := pick(lv.sas.lookup(v6Key(hi, lo, lv.bits)), src, dst); s != nil {
				return s, CounterNone
			}
		}
	}
	if s := pick(f.anyDst, src, dst); s != nil {
		return s, CounterNone
	}
	return nil, XfrmOutNoStates
}

// allowed applies a policy list: the first match decides, no match blocks.
func allowed(pols []Policy, src, dst netip.Addr) bool {
	for i := range pols {
		if pols[i].Selector.match(src, dst) {
			return pols[i].Action == ActionAllow
		}
	}
	return false
}

// pick returns the SA of list that seals a packet from src to dst. It
// chooses as Linux's xfrm_state_look_at (net/xfrm/xfrm_state.c) does among
// the states that could serve a flow: only valid states count, so a
// hard-expired SA is never picked (Linux: XFRM_STATE_EXPIRED, the lookup
// fails); among valid ones a state that is not dying (no soft expiry)
// beats a dying one, and among equals the newest add time wins. list is
// newest first (index), so the first live SA wins, else the first dying
// one.
func pick(list []*SA, src, dst netip.Addr) *SA {
	var dying *SA
	for _, s := range list {
		if !s.covers(src, dst) || s.hardExpired.Load() {
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
	if p.Off < 0 || p.Len < 0 || p.Off+p.Len > len(p.Buf) {
		p.Drop = XfrmInHdrError
		d.counters.Inc(p.Drop)
		return nil
	}
	spi, ok := esp.SPIOf(p.Buf[p.Off : p.Off+p.Len])
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

// checkIn applies inbound policies to an opened inner packet.
func checkIn(pols []Policy, pkt []byte) Counter {
	src, dst, ok := innerAddrs(pkt)
	if !ok {
		return XfrmInNoPols
	}
	for i := range pols {
		if pols[i].Selector.match(src, dst) {
			if pols[i].Action == ActionAllow {
				return CounterNone
			}
			return XfrmInPolBlock
		}
	}
	return XfrmInNoPols
}
