package pool

import (
	"container/list"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"sync"
)

// ErrExhausted is wrapped by Acquire's error when every address of the
// pool is leased to a client that is online. The message names the pool:
// make it larger, or add one to the connection's pools.
var ErrExhausted = errors.New("pool exhausted")

// ErrRetired is wrapped by Acquire's error when the pool is retired
// (Retire): on its way out.
var ErrRetired = errors.New("pool retired")

// ErrFamily is wrapped by Acquire's error when the requested address is
// of the other family than the pool's.
var ErrFamily = errors.New("pool: no address of the requested family")

// Pool hands out the addresses of one Range (see the package doc). The
// zero value is not usable: call New. Safe for concurrent use.
type Pool struct {
	name string
	r    Range
	// reserved are the offsets in r never handed out (the pool's own DNS
	// servers, New), sorted.
	reserved []uint32

	mu sync.Mutex
	// mu guards:
	byID    map[string]*entry // every identity with a lease, online or offline
	unused  uint32            // offsets from it on have never been handed out
	free    []span            // offsets below unused that no lease holds (after restore)
	offline list.List         // of *offlineLease, oldest first
	online  int               // online leases (an address shared by two SAs counts twice)
	gen     uint64            // bumped on every change, for Set.Flush
	retired bool              // Retire: Acquire refuses
}

// entry is one identity's leases.
type entry struct {
	id      string
	online  []onlineLease
	offline []*list.Element // of the pool's offline list
}

// onlineLease is an address in use by an IKE SA from peer.
type onlineLease struct {
	off  uint32
	peer netip.AddrPort
}

// offlineLease is an address its identity is not using, kept for it.
type offlineLease struct {
	e   *entry
	off uint32
}

// New returns an empty pool named name over r. The addresses of r among
// reserved (the DNS servers the pool names to its clients) are never
// handed out: a client given one would take over the server's address.
// Those outside r do not matter.
func New(name string, r Range, reserved ...netip.Addr) *Pool {
	p := &Pool{name: name, r: r, byID: map[string]*entry{}}
	for _, a := range reserved {
		if off, ok := r.Offset(a); ok {
			p.reserved = append(p.reserved, off)
		}
	}
	slices.Sort(p.reserved)
	p.reserved = slices.Compact(p.reserved)
	return p
}

// isReserved reports whether the address at off is never handed out.
func (p *Pool) isReserved(off uint32) bool {
	_, found := slices.BinarySearch(p.reserved, off)
	return found
}

// size is how many addresses the pool hands out.
func (p *Pool) size() uint32 { return p.r.Size - uint32(len(p.reserved)) }

// Name returns the pool's name.
func (p *Pool) Name() string { return p.name }

// Range returns the addresses the pool hands out.
func (p *Pool) Range() Range { return p.r }

// Acquire leases an address to id for an IKE SA with peer. requested is
// the address the client asked for (0.0.0.0 or :: for any); it says the
// family, and an online lease of id at that address from the same peer is
// shared (a client that re-authenticates before its old SA is gone), as
// strongSwan does. In order Acquire hands out: id's oldest offline lease;
// that shared online lease; an address never handed out; the offline
// lease another identity left longest ago. With none of them it returns
// an error wrapping ErrExhausted that names the pool; with requested of
// the other family one wrapping ErrFamily.
func (p *Pool) Acquire(id string, requested netip.Addr, peer netip.AddrPort) (netip.Addr, error) {
	if requested.Unmap().Is4() == p.r.Is6() {
		return netip.Addr{}, fmt.Errorf("%w: pool %s holds %s", ErrFamily, p.name, family(p.r.Is6()))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.retired {
		return netip.Addr{}, fmt.Errorf("%w: pool %s is being unloaded or replaced", ErrRetired, p.name)
	}
	e := p.byID[id]
	if e != nil && len(e.offline) > 0 {
		el := e.offline[0]
		e.offline = slices.Delete(e.offline, 0, 1)
		return p.takeLocked(e, el, peer), nil
	}
	if e != nil {
		if off, ok := p.r.Offset(requested); ok {
			for _, l := range e.online {
				if l.off == off && l.peer == peer {
					return p.onlineLocked(e, off, peer), nil
				}
			}
		}
	}
	if off, ok := p.newLocked(); ok {
		if e == nil {
			e = &entry{id: id}
			p.byID[id] = e
		}
		return p.onlineLocked(e, off, peer), nil
	}
	el := p.offline.Front()
	if el == nil {
		return netip.Addr{}, fmt.Errorf("%w: pool %s: all %d addresses are leased to clients online", ErrExhausted, p.name, p.size())
	}
	old := el.Value.(*offlineLease).e
	old.offline = slices.DeleteFunc(old.offline, func(x *list.Element) bool { return x == el })
	if len(old.online) == 0 && len(old.offline) == 0 {
		delete(p.byID, old.id)
	}
	if e == nil {
		e = &entry{id: id}
		p.byID[id] = e
	}
	return p.takeLocked(e, el, peer), nil
}

// span is the offsets from, from+1, ..., to-1.
type span struct{ from, to uint32 }

// newLocked takes an offset no lease holds and none reserved: a gap that
// restore left, or the next never handed out. Each reserved offset is
// passed over once, as neither source goes back.
func (p *Pool) newLocked() (uint32, bool) {
	for {
		off, ok := p.nextLocked()
		if !ok || !p.isReserved(off) {
			return off, ok
		}
	}
}

// nextLocked takes the next offset of the gaps or of those never handed
// out, reserved or not.
func (p *Pool) nextLocked() (uint32, bool) {
	if n := len(p.free); n > 0 {
		sp := &p.free[n-1]
		off := sp.from
		if sp.from++; sp.from == sp.to {
			p.free = p.free[:n-1]
		}
		return off, true
	}
	if p.unused < p.r.Size {
		p.unused++
		return p.unused - 1, true
	}
	return 0, false
}

// takeLocked makes the offline lease el online for e.
func (p *Pool) takeLocked(e *entry, el *list.Element, peer netip.AddrPort) netip.Addr {
	off := p.offline.Remove(el).(*offlineLease).off
	return p.onlineLocked(e, off, peer)
}

func (p *Pool) onlineLocked(e *entry, off uint32, peer netip.AddrPort) netip.Addr {
	e.online = append(e.online, onlineLease{off: off, peer: peer})
	p.online++
	p.gen++
	return p.r.Addr(off)
}

// Release ends one use of id's lease of a (its IKE SA went). When no
// other SA of id uses a, the lease goes offline: kept for id until the
// pool needs it for another. It reports whether id held a.
func (p *Pool) Release(id string, a netip.Addr) bool {
	off, ok := p.r.Offset(a)
	if !ok {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.byID[id]
	if e == nil {
		return false
	}
	i := slices.IndexFunc(e.online, func(l onlineLease) bool { return l.off == off })
	if i < 0 {
		return false
	}
	e.online = slices.Delete(e.online, i, i+1)
	p.online--
	p.gen++
	if !slices.ContainsFunc(e.online, func(l onlineLease) bool { return l.off == off }) {
		p.offlineLocked(e, off)
	}
	return true
}

// offlineLocked keeps off for e, the newest of the offline leases.
func (p *Pool) offlineLocked(e *entry, off uint32) {
	e.offline = append(e.offline, p.offline.PushBack(&offlineLease{e: e, off: off}))
}

// Lease is one address of a pool and the identity it is leased to.
type Lease struct {
	ID     string
	Addr   netip.Addr
	Online bool // in use by an IKE SA; else kept for ID (offline)
}

// Leases returns the pool's leases, sorted by address, an address that
// two SAs of one identity share once.
func (p *Pool) Leases() []Lease {
	p.mu.Lock()
	var ls []Lease
	for _, e := range p.byID {
		for i, l := range e.online {
			if !slices.ContainsFunc(e.online[:i], func(x onlineLease) bool { return x.off == l.off }) {
				ls = append(ls, Lease{ID: e.id, Addr: p.r.Addr(l.off), Online: true})
			}
		}
		for _, el := range e.offline {
			ls = append(ls, Lease{ID: e.id, Addr: p.r.Addr(el.Value.(*offlineLease).off)})
		}
	}
	p.mu.Unlock()
	sort.Slice(ls, func(i, j int) bool { return ls[i].Addr.Less(ls[j].Addr) })
	return ls
}

// Stats counts a pool's addresses.
type Stats struct {
	Size    uint32 // addresses the pool hands out (its reserved ones not)
	Online  int    // leases in use (an address shared by two SAs counts twice)
	Offline int    // leases kept for identities that are not online
}

// Stats returns the pool's counts.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{Size: p.size(), Online: p.online, Offline: p.offline.Len()}
}

func family(is6 bool) string {
	if is6 {
		return "IPv6 addresses"
	}
	return "IPv4 addresses"
}

// Retire makes p hand out no more addresses, so that it can be removed
// or replaced by other addresses with no lease online, as charon's vici
// refuses otherwise: when a lease is online it leaves p as it was and
// returns how many are; else it retires p and returns 0, and from then
// on Acquire fails with ErrRetired until Unretire. Checking and retiring
// under one lock, no client can take an address in between.
func (p *Pool) Retire() (online int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.online > 0 {
		return p.online
	}
	p.retired = true
	return 0
}

// Unretire undoes Retire (the removal it prepared failed).
func (p *Pool) Unretire() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.retired = false
}
