package sa

import (
	"cmp"
	"fmt"
	"maps"
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
// It is safe for concurrent use. Lookups read an immutable table through an
// atomic pointer and take no lock; changes are serialised by a mutex, copy
// the part of the table they touch (one shard of 256, and one interface's
// entry) and publish a new table. Lookup cost does not grow with the number
// of SAs, interfaces or policies of other interfaces (DESIGN.md lessons 2
// and 4).
type SAD struct {
	counters *Counters
	handler  atomic.Pointer[func(Event)]

	mu sync.Mutex // serialises writers; readers only Load table
	// mu guards: replacing table.
	table atomic.Pointer[table]
}

const numShards = 256

// table is one immutable version of the SAD. Maps and slices reachable
// from it are never written after it is published.
type table struct {
	in    [numShards]map[uint32][]*SA // inbound SAs by SPI (usually one)
	out   [numShards]map[uint32][]*SA // outbound SAs by SPI
	iface [numShards]map[uint32]*iface
	// policies in the order added, for Policies.
	policies []Policy
	n        int // number of SAs
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
// a map per distinct prefix length, tried longest first.
type lpm struct {
	lens     []int                  // distinct prefix lengths, descending
	byPrefix map[netip.Prefix][]*SA // masked prefix -> SAs, newest first
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
// or the caller of Tick. It must not block: hand the event to another
// goroutine (a buffered channel with a non-blocking send, for example) and
// return.
func (d *SAD) SetEventHandler(fn func(Event)) {
	if fn == nil {
		d.handler.Store(nil)
		return
	}
	d.handler.Store(&fn)
}

// Tick applies the add-time lifetimes at now: soft and hard expiry events
// and stopping hard-expired SAs. The daemon calls it every second; it costs
// O(number of SAs).
func (d *SAD) Tick(now time.Time) {
	t := d.table.Load()
	for i := range t.in {
		for _, list := range t.in[i] {
			for _, s := range list {
				s.tick(now)
			}
		}
		for _, list := range t.out[i] {
			for _, s := range list {
				s.tick(now)
			}
		}
	}
}

// LookupIn returns the inbound SA with spi and outer destination dst (an
// invalid dst matches any), or nil. It takes no lock and allocates nothing.
func (d *SAD) LookupIn(spi uint32, dst netip.Addr) *SA {
	list := d.table.Load().in[shardOf(spi)][spi]
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
		for _, list := range t.in[i] {
			all = append(all, list...)
		}
		for _, list := range t.out[i] {
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
// policy). It costs O(n) and allocates a new table.
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
	for _, s := range states {
		m := t.bySPI(s.cfg.Dir)
		sh := shardOf(s.cfg.SPI)
		if m[sh] == nil {
			m[sh] = map[uint32][]*SA{}
		}
		list := m[sh][s.cfg.SPI]
		for _, o := range list {
			if o.cfg.Dst == s.cfg.Dst {
				return fmt.Errorf("state %v: %w", s, ErrExists)
			}
		}
		m[sh][s.cfg.SPI] = append(list, s)
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
			return fmt.Errorf("policy %d (%s if_id %d %v -> %v): %w", i, p.Dir, p.IfID, p.Selector.Src, p.Selector.Dst, ErrExists)
		}
		f.addPolicy(p)
	}
	for id, f := range ifaces {
		f.index()
		sh := shardOf(id)
		if t.iface[sh] == nil {
			t.iface[sh] = map[uint32]*iface{}
		}
		t.iface[sh][id] = f
	}
	t.policies = slices.Clone(policies)
	t.n = len(states)

	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range states {
		s.sad.Store(d)
	}
	d.table.Store(t)
	return nil
}

func (t *table) bySPI(dir Dir) *[numShards]map[uint32][]*SA {
	if dir == DirIn {
		return &t.in
	}
	return &t.out
}

// Add puts s into the SAD. An SA with the same direction, SPI and outer
// destination is refused with ErrExists. Among outbound SAs with the same
// if_id and selector, the newest is used (make-before-break rekeying).
func (d *SAD) Add(s *SA) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	old := d.table.Load()
	for _, o := range old.bySPI(s.cfg.Dir)[shardOf(s.cfg.SPI)][s.cfg.SPI] {
		if o.cfg.Dst == s.cfg.Dst {
			return fmt.Errorf("state %v: %w", s, ErrExists)
		}
	}
	t := *old
	sh := shardOf(s.cfg.SPI)
	m := maps.Clone(old.bySPI(s.cfg.Dir)[sh])
	if m == nil {
		m = map[uint32][]*SA{}
	}
	m[s.cfg.SPI] = append(slices.Clip(m[s.cfg.SPI]), s)
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
// the first with that SPI). ErrNotFound if there is none.
func (d *SAD) Delete(dir Dir, spi uint32, dst netip.Addr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	old := d.table.Load()
	sh := shardOf(spi)
	list := old.bySPI(dir)[sh][spi]
	i := slices.IndexFunc(list, func(s *SA) bool { return s.matchDst(dst) })
	if i < 0 {
		return fmt.Errorf("state %s spi 0x%08x dst %v: %w", dir, spi, dst, ErrNotFound)
	}
	victim := list[i]
	t := *old
	m := maps.Clone(old.bySPI(dir)[sh])
	if len(list) == 1 {
		delete(m, spi)
	} else {
		m[spi] = slices.Delete(slices.Clone(list), i, i+1)
	}
	t.bySPI(dir)[sh] = m
	if dir == DirOut {
		f := t.cloneIface(victim.cfg.IfID)
		f.outSAs = slices.DeleteFunc(f.outSAs, func(s *SA) bool { return s == victim })
		f.index()
	}
	t.n--
	d.table.Store(&t)
	return nil
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
	if f := old.iface[shardOf(p.IfID)][p.IfID]; f != nil && f.hasPolicy(p) {
		return fmt.Errorf("policy %s if_id %d %v -> %v: %w", p.Dir, p.IfID, p.Selector.Src, p.Selector.Dst, ErrExists)
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
		return fmt.Errorf("policy %s if_id %d %v -> %v: %w", p.Dir, p.IfID, p.Selector.Src, p.Selector.Dst, ErrNotFound)
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
	sh := shardOf(id)
	m := maps.Clone(t.iface[sh])
	if m == nil {
		m = map[uint32]*iface{}
	}
	f := &iface{}
	if old := m[id]; old != nil {
		f.outSAs = slices.Clone(old.outSAs)
		f.outPol = slices.Clone(old.outPol)
		f.inPol = slices.Clone(old.inPol)
		f.anyDst, f.v4, f.v6 = old.anyDst, old.v4, old.v6
	}
	m[id] = f
	t.iface[sh] = m
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

// index rebuilds the selector index from outSAs.
func (f *iface) index() {
	f.anyDst = nil
	f.v4, f.v6 = lpm{}, lpm{}
	for i := len(f.outSAs) - 1; i >= 0; i-- { // newest first
		s := f.outSAs[i]
		dst := s.cfg.Selector.Dst
		if !dst.IsValid() {
			f.anyDst = append(f.anyDst, s)
			continue
		}
		l := &f.v6
		if dst.Addr().Is4() {
			l = &f.v4
		}
		if l.byPrefix == nil {
			l.byPrefix = map[netip.Prefix][]*SA{}
		}
		key := dst.Masked()
		if _, ok := l.byPrefix[key]; !ok && !slices.Contains(l.lens, key.Bits()) {
			l.lens = append(l.lens, key.Bits())
		}
		l.byPrefix[key] = append(l.byPrefix[key], s)
	}
	slices.SortFunc(f.v4.lens, func(a, b int) int { return b - a })
	slices.SortFunc(f.v6.lens, func(a, b int) int { return b - a })
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
// longest wins; then SAs without a destination prefix. Among equals, the
// newest SA that is not expired. The cost is one hash lookup per distinct
// prefix length of the interface; it takes no lock and allocates nothing.
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
	f := d.table.Load().iface[shardOf(ifID)][ifID]
	if f == nil {
		return nil, XfrmOutNoStates
	}
	if len(f.outPol) != 0 && !allowed(f.outPol, src, dst) {
		return nil, XfrmOutPolBlock
	}
	l := &f.v6
	if dst.Is4() {
		l = &f.v4
	}
	for _, bits := range l.lens {
		pfx, _ := dst.Prefix(bits)
		if s := pick(l.byPrefix[pfx], src, dst); s != nil {
			return s, CounterNone
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

// pick returns the best SA of list (newest first) whose selector matches:
// the first live one, else the first soft-expired one, else the first.
func pick(list []*SA, src, dst netip.Addr) *SA {
	var soft, hard *SA
	for _, s := range list {
		if !s.cfg.Selector.match(src, dst) {
			continue
		}
		switch {
		case s.hardExpired.Load():
			if hard == nil {
				hard = s
			}
		case s.softFired.Load():
			if soft == nil {
				soft = s
			}
		default:
			return s
		}
	}
	if soft != nil {
		return soft
	}
	return hard
}

// OpenBatch opens a batch of ESP packets from the underlay: per packet it
// reads the SPI, finds the inbound SA (any destination), and opens runs of
// consecutive packets of one SA with that SA's OpenBatch. Then, when the
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
		if f := t.iface[shardOf(s.cfg.IfID)][s.cfg.IfID]; f != nil && len(f.inPol) != 0 {
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
	list := t.in[shardOf(spi)][spi]
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
