package sa

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
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
// the part of the table they touch (a shard of 256 of each index an SA is
// in, and its interface's entry) and publish a new table, so that Update,
// Add and Delete cost what their SAs cost, not what the SAD holds; Replace
// builds the table whole. Lookup cost does not grow with the number of
// SAs, interfaces or policies of other interfaces (docs/design.md, lessons 2
// and 4).
type SAD struct {
	counters *Counters
	handler  atomic.Pointer[func(Event)]
	acquire  atomic.Pointer[acquireHandler] // acquire.go

	mu sync.Mutex // serialises writers; readers only Load table
	// mu guards: replacing table.
	table atomic.Pointer[table]
}

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

// States returns all SAs, ordered by direction, SPI and destination.
func (d *SAD) States() []*SA {
	all := d.StatesUnordered()
	slices.SortFunc(all, CompareStates)
	return all
}

// StatesUnordered returns all SAs in no particular order: for a caller
// that changes the SAD one SA at a time and needs the rest, not an order
// (sorting them cost IKE more than the handshakes at 1,000 children).
func (d *SAD) StatesUnordered() []*SA {
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
	return all
}

// CompareStates orders SAs as States lists them: by direction, SPI and
// destination.
func CompareStates(a, b *SA) int {
	return cmp.Or(cmp.Compare(a.cfg.Dir, b.cfg.Dir), cmp.Compare(a.cfg.SPI, b.cfg.SPI), a.cfg.Dst.Compare(b.cfg.Dst))
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
// uses them (retire.go). It costs O(n) and allocates a new table: to add
// or remove a few SAs, Update costs only theirs.
func (d *SAD) Replace(states []*SA, policies []Policy) error {
	t := &table{}
	ifaces := map[uint32]*iface{}
	outSAs := map[uint32][]*SA{}
	get := func(id uint32) *iface {
		f := ifaces[id]
		if f == nil {
			f = &iface{}
			ifaces[id] = f
		}
		return f
	}
	in, out := writer(&t.in), writer(&t.out)
	keep := make(map[*SA]bool, len(states))
	for _, s := range states {
		keep[s] = true
		w := in
		if s.cfg.Dir == DirOut {
			w = out
			get(s.cfg.IfID)
			outSAs[s.cfg.IfID] = append(outSAs[s.cfg.IfID], s)
		}
		list := w.s.lookup(s.cfg.SPI)
		if err := conflict(list, s); err != nil {
			return err
		}
		w.set(s.cfg.SPI, append(list, s))
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
	ifw := writer(&t.iface)
	for id, f := range ifaces {
		f.buildIndex(outSAs[id])
		if id == 0 {
			t.iface0 = f
			continue
		}
		ifw.set(id, f)
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

// Update removes the SAs of remove from the SAD and adds those of add, in
// one table change: an IKE child installed with the SAs it replaces, or
// removed. It checks everything first and changes nothing on error
// (ErrNotFound for an SA of remove that the SAD does not hold, ErrExists
// as Add, ErrRetired for an SA of add that has left a SAD). The removed
// SAs are retired: their keys are zeroed once no batch uses them
// (retire.go). It costs what the SAs it changes cost, the same beside 10
// SAs as beside 10,000: it copies the shards of the indexes they are in,
// not the table.
func (d *SAD) Update(remove, add []*SA) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := change(d.table.Load())
	for _, s := range remove {
		if !c.remove(s) {
			return fmt.Errorf("state %v: %w", s, ErrNotFound)
		}
	}
	for _, s := range add {
		if s.Retired() {
			return fmt.Errorf("state %v: %w", s, ErrRetired)
		}
		if err := c.add(s); err != nil {
			return err
		}
	}
	for _, s := range add {
		s.sad.Store(d)
	}
	d.table.Store(&c.t)
	for _, s := range remove {
		s.retire()
	}
	return nil
}

// Lookup returns the SA with dir, spi and outer destination dst (invalid:
// the first with that SPI), or nil: the SA a control command or IKE names.
// It takes no lock.
func (d *SAD) Lookup(dir Dir, spi uint32, dst netip.Addr) *SA {
	for _, s := range d.table.Load().bySPI(dir).lookup(spi) {
		if s.matchDst(dst) {
			return s
		}
	}
	return nil
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
			return fmt.Errorf("state %v: inbound SPI %#x is taken by the SA to %v (inbound SAs are found by SPI alone): %w",
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
func (d *SAD) Add(s *SA) error { return d.Update(nil, []*SA{s}) }

// Delete removes the SA with dir, spi and outer destination dst (invalid:
// the first with that SPI). ErrNotFound if there is none. The SA is
// retired: its keys are zeroed once no batch uses it (retire.go).
func (d *SAD) Delete(dir Dir, spi uint32, dst netip.Addr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	victim := d.Lookup(dir, spi, dst)
	if victim == nil {
		return fmt.Errorf("state spi %#x dir %s dst %v: %w", spi, dir, dst, ErrNotFound)
	}
	c := change(d.table.Load())
	c.remove(victim)
	d.table.Store(&c.t)
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
	c := change(old)
	for _, s := range dead {
		c.remove(s)
	}
	d.table.Store(&c.t)
	for _, s := range dead {
		s.retire()
	}
	slices.SortFunc(dead, func(a, b *SA) int {
		return cmp.Or(cmp.Compare(a.cfg.Dir, b.cfg.Dir), cmp.Compare(a.cfg.SPI, b.cfg.SPI), a.cfg.Dst.Compare(b.cfg.Dst))
	})
	return dead
}
