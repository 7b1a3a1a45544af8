package pool

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
)

// Set is the pools of a config, by name. The zero value is an empty set.
// Safe for concurrent use.
type Set struct {
	mu sync.Mutex
	// mu guards:
	pools   []*Pool // in the config's order
	version uint64  // bumped when pools change (Replace, Load)
	// What Flush wrote last: the version, and each pool's gen.
	savedVersion uint64
	savedGen     map[*Pool]uint64
}

// NewSet returns a set of pools, whose names must differ.
func NewSet(pools ...*Pool) (*Set, error) {
	s := &Set{}
	return s, s.Replace(pools...)
}

// Pool returns the pool named name, or nil.
func (s *Set) Pool(name string) *Pool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.poolLocked(name)
}

func (s *Set) poolLocked(name string) *Pool {
	for _, p := range s.pools {
		if p.name == name {
			return p
		}
	}
	return nil
}

// Pools returns the pools in the order they were given.
func (s *Set) Pools() []*Pool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.pools)
}

// Replace makes pools the set's (a reload). A pool of the same name,
// range and reserved addresses as one the set has is replaced by that
// one, leases and all; one whose range or reserved addresses changed
// takes over the old pool's leases that are in its new range and not
// reserved; the leases of a pool that is gone are dropped.
func (s *Set) Replace(pools ...*Pool) error {
	names := map[string]bool{}
	for _, p := range pools {
		if names[p.name] {
			return fmt.Errorf("pool: two pools named %q", p.name)
		}
		names[p.name] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Pool, len(pools))
	for i, p := range pools {
		old := s.poolLocked(p.name)
		switch {
		case old == nil:
			out[i] = p
		case old.r.First == p.r.First && old.r.Size == p.r.Size && slices.Equal(old.reserved, p.reserved):
			out[i] = old
		default:
			p.restore(old.Leases())
			out[i] = p
		}
	}
	s.pools = out
	s.version++
	return nil
}

// Acquire leases id an address of the family of requested from the first
// of the pools named that has one (Pool.Acquire), and returns it with the
// pool. When every pool of that family is exhausted the error names them
// and wraps ErrExhausted; when none is of that family it wraps ErrFamily.
func (s *Set) Acquire(names []string, id string, requested netip.Addr, peer netip.AddrPort) (netip.Addr, *Pool, error) {
	var errs []error
	for _, n := range names {
		p := s.Pool(n)
		if p == nil || p.r.Is6() != requested.Unmap().Is6() {
			continue
		}
		a, err := p.Acquire(id, requested, peer)
		if err == nil {
			return a, p, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return netip.Addr{}, nil, fmt.Errorf("%w: none of the pools %s holds %s", ErrFamily, strings.Join(names, ", "), family(requested.Unmap().Is6()))
	}
	return netip.Addr{}, nil, errors.Join(errs...)
}

// Release ends one use of id's lease of a in the pool named name
// (Pool.Release).
func (s *Set) Release(name, id string, a netip.Addr) bool {
	if p := s.Pool(name); p != nil {
		return p.Release(id, a)
	}
	return false
}

// changedLocked reports whether a pool or a lease changed since Flush
// wrote them last.
func (s *Set) changedLocked() bool {
	if s.savedGen == nil || s.version != s.savedVersion {
		return true
	}
	for _, p := range s.pools {
		p.mu.Lock()
		gen := p.gen
		p.mu.Unlock()
		if g, ok := s.savedGen[p]; !ok || g != gen {
			return true
		}
	}
	return false
}
