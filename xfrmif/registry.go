package xfrmif

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/ipsecd/ipsecd/internal/parallel"
	"github.com/ipsecd/ipsecd/tun"
)

// ErrExists is returned by Add when the if_id or name is taken: remove the
// old interface first, or use Sync.
var ErrExists = errors.New("xfrmif: interface exists")

// Registry maps if_id to Interface. Lookup reads an immutable map through
// an atomic pointer: no lock, no allocation, and the same cost at any
// number of interfaces. Add, Remove and Sync copy the map and publish the
// copy, so they cost O(interfaces) and are serialised with each other; they
// are for configuration, not the data path. The zero Registry is empty and
// ready; it creates TUN interfaces with Create unless Create is set.
type Registry struct {
	// Create makes an interface for Sync; nil means Create (a TUN in the
	// calling thread's network namespace).
	Create func(Config) (*Interface, error)

	table atomic.Pointer[map[uint32]*Interface]

	// mu serialises writers (Add, Remove, Sync, Close); Lookup never
	// takes it.
	mu sync.Mutex
}

// Lookup returns the interface with if_id ifID, or nil. Safe from any
// goroutine at any time; the interface returned may be closed by a
// concurrent Remove, after which its ReadQueue and WriteQueue return
// ErrClosed.
func (r *Registry) Lookup(ifID uint32) *Interface {
	t := r.table.Load()
	if t == nil {
		return nil
	}
	return (*t)[ifID]
}

// Len is the number of interfaces.
func (r *Registry) Len() int {
	t := r.table.Load()
	if t == nil {
		return 0
	}
	return len(*t)
}

// All returns the interfaces ordered by if_id.
func (r *Registry) All() []*Interface {
	t := r.table.Load()
	if t == nil {
		return nil
	}
	all := slices.Collect(maps.Values(*t))
	slices.SortFunc(all, func(a, b *Interface) int { return int(int64(a.ifID) - int64(b.ifID)) })
	return all
}

func (r *Registry) current() map[uint32]*Interface {
	if t := r.table.Load(); t != nil {
		return *t
	}
	return nil
}

// Add publishes ifc. It fails with ErrExists if its if_id or name is taken.
// Adding many interfaces one by one costs O(n²); AddAll costs O(n).
func (r *Registry) Add(ifc *Interface) error { return r.AddAll(ifc) }

// AddAll publishes several interfaces at once, all or none.
func (r *Registry) AddAll(ifcs ...*Interface) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.current()
	names := make(map[string]bool, len(old)+len(ifcs))
	for _, ifc := range old {
		names[ifc.name] = true
	}
	next := make(map[uint32]*Interface, len(old)+len(ifcs))
	maps.Copy(next, old)
	for _, ifc := range ifcs {
		if next[ifc.ifID] != nil || names[ifc.name] {
			return fmt.Errorf("%w: %s if_id %d", ErrExists, ifc.name, ifc.ifID)
		}
		next[ifc.ifID] = ifc
		names[ifc.name] = true
	}
	r.table.Store(&next)
	return nil
}

// Remove unpublishes and returns the interface with if_id ifID (nil if
// none). It does not close it: the caller does, once it wants to.
func (r *Registry) Remove(ifID uint32) *Interface {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.current()
	ifc := old[ifID]
	if ifc == nil {
		return nil
	}
	next := maps.Clone(old)
	delete(next, ifID)
	r.table.Store(&next)
	return ifc
}

// Close unpublishes and closes every interface (see closeAll).
func (r *Registry) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.current()
	empty := map[uint32]*Interface{}
	r.table.Store(&empty)
	return closeAll(slices.Collect(maps.Values(old))).err()
}

// closeParallelism bounds concurrent interface removals of links that
// are not TUN devices.
const closeParallelism = 32

// closeAll closes ifcs and returns their failures. The TUN devices among
// them are removed together (tun.CloseAll: one request instead of a wait
// for RCU grace periods per device), the other links in parallel.
func closeAll(ifcs []*Interface) *SyncError {
	var (
		mu     sync.Mutex
		failed = &SyncError{Total: len(ifcs)}
		devs   []unrouting
		named  []string
		others []*Interface
	)
	for _, ifc := range ifcs {
		if ifc.closed.Swap(true) {
			continue
		}
		if l, ok := ifc.link.(tunLink); ok {
			devs = append(devs, unrouting{l.Device, ifc.Config()})
			named = append(named, ifc.name)
			continue
		}
		others = append(others, ifc)
	}
	parallel.For(len(devs), bringUpParallelism, func(i int) { unroute(devs[i]) })
	tdevs := make([]*tun.Device, len(devs))
	for i, d := range devs {
		tdevs[i] = d.dev
	}
	for i, err := range tun.CloseAll(tdevs) {
		if err != nil {
			failed.add(named[i], fmt.Errorf("xfrmif: close %s: %w", named[i], err))
		}
	}
	parallel.For(len(others), closeParallelism, func(i int) {
		ifc := others[i]
		if err := ifc.link.Close(); err != nil {
			mu.Lock()
			failed.add(ifc.name, fmt.Errorf("xfrmif: close %s: %w", ifc.name, err))
			mu.Unlock()
		}
	})
	return failed
}

// SyncResult says what Sync did, by interface name.
type SyncResult struct {
	Added, Removed, Reconfigured, Replaced, Unchanged []string
}

// Sync makes the registry match cfgs, for start-up and reload (SIGHUP):
//
//   - an interface whose name and if_id are both in cfgs is kept running;
//     its MTU, addresses and routes are reapplied where they changed
//     (Reconfigured), or left alone (Unchanged);
//   - one whose queue count or routing table changed is closed and
//     created again (Replaced): queues cannot be added to a running
//     device, and its routes move with the table;
//   - one not in cfgs (by name and if_id) is unpublished and closed
//     (Removed), before new ones are created, so a name or if_id can move;
//   - one in cfgs and not in the registry is created and published
//     (Added).
//
// cfgs is validated whole first (ValidateAll); if it is invalid nothing
// changes. Failures after that (a device that cannot be created, an address
// the kernel refuses) do not stop the rest: Sync applies all it can and
// returns them as a *SyncError; the registry then holds what works, and a
// later Sync retries the rest. Interfaces are published before Sync returns
// and removed ones are unpublished before they are closed. Devices are
// created on the calling goroutine, so TUN devices are made in its
// thread's network namespace.
func (r *Registry) Sync(cfgs []Config) (SyncResult, error) { return r.SyncGuarded(cfgs, nil) }

// SyncGuarded is Sync with a step of the caller's in the middle: guard
// (unless nil) runs once the new TUN devices exist and are up, and before
// any interface, new or kept, gets an address or route. ipsecd places its
// fail-closed guard routes there: a prefix is guarded before it is routed,
// and the guards are not yet among the routes the kernel walks while the
// devices come up (see bringUp). If guard fails, the new devices are
// closed, nothing is routed, and SyncGuarded returns its error.
func (r *Registry) SyncGuarded(cfgs []Config, guard func() error) (SyncResult, error) {
	var res SyncResult
	if err := ValidateAll(cfgs); err != nil {
		return res, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.current()

	var (
		keep   = make(map[uint32]*Interface, len(cfgs))
		toMake []Config
		reconf []Config
		failed = &SyncError{Total: len(cfgs)}
	)
	for _, c := range cfgs {
		c = c.withDefaults()
		ifc := old[c.IfID]
		if ifc == nil || ifc.name != c.Name {
			toMake = append(toMake, c)
			continue
		}
		if len(ifc.queues) != c.Queues || ifc.Config().Table != c.Table {
			toMake = append(toMake, c)
			res.Replaced = append(res.Replaced, c.Name)
			continue
		}
		keep[c.IfID] = ifc
		if ifc.sameConfig(c) {
			res.Unchanged = append(res.Unchanged, c.Name)
			continue
		}
		reconf = append(reconf, c)
		res.Reconfigured = append(res.Reconfigured, c.Name)
	}

	// Unpublish and close what goes (or is replaced) before creating, so
	// names and if_ids are free.
	var gone []*Interface
	for id, ifc := range old {
		if keep[id] != ifc {
			gone = append(gone, ifc)
			if !slices.Contains(res.Replaced, ifc.name) {
				res.Removed = append(res.Removed, ifc.name)
			}
		}
	}
	if len(gone) > 0 {
		next := maps.Clone(keep)
		r.table.Store(&next)
		closed := closeAll(gone)
		for i, err := range closed.Errs {
			failed.add(closed.Names[i], err)
		}
	}

	devs := r.bringUp(toMake, failed)
	if guard != nil {
		if err := guard(); err != nil {
			tun.CloseAll(slices.DeleteFunc(devs, func(d *tun.Device) bool { return d == nil }))
			return res, err
		}
	}
	for _, c := range reconf {
		failed.add(c.Name, keep[c.IfID].Reconfigure(c))
	}
	next := maps.Clone(keep)
	for i, ifc := range r.configure(toMake, devs, failed) {
		if ifc == nil {
			continue
		}
		c := toMake[i]
		next[c.IfID] = ifc
		if !slices.Contains(res.Replaced, c.Name) {
			res.Added = append(res.Added, c.Name)
		}
	}
	r.table.Store(&next)
	for _, l := range [][]string{res.Added, res.Removed, res.Reconfigured, res.Replaced, res.Unchanged} {
		slices.Sort(l)
	}
	return res, failed.err()
}

// sameConfig reports whether c (with defaults) is what ifc has applied.
func (ifc *Interface) sameConfig(c Config) bool {
	ifc.mu.Lock()
	defer ifc.mu.Unlock()
	a, r := diff(ifc.cfg.Addresses, c.Addresses)
	ra, rr := diff(ifc.cfg.Routes, c.Routes)
	return ifc.cfg.MTU == c.MTU && ifc.cfg.TxQueueLen == c.TxQueueLen && len(a)+len(r)+len(ra)+len(rr) == 0
}
