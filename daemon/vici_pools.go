package daemon

import (
	"fmt"
	"slices"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/vici"
)

// Address pools loaded over vici (vici.PoolLoader). They are vici's, as
// its connections are: a reload of the config file leaves them, and they
// live in memory only, as charon's (the daemon forgets them, and their
// leases, when it stops). The file's pools and vici's share one
// namespace, the file winning a name as it wins a connection's: load-pool
// of a name the file has is refused, and a vici pool whose name (or
// addresses) the file takes later is left out, with a warning. Both kinds
// hand out addresses from the one pool.Set that IKE holds, so that a
// connection of either may name a pool of either.

var _ vici.PoolLoader = (*backend)(nil)

// LoadPool adds a pool of vici's, or replaces one: the same addresses
// keep their leases (only DNS, subnets and domains change); other
// addresses are refused while a client is online with a lease, as charon
// refuses them.
func (b *backend) LoadPool(name string, item []byte) error {
	n := (*Daemon)(b)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cfg == nil {
		return fmt.Errorf("%w: this daemon runs no config file", control.ErrInvalid)
	}
	cfg, err := parseVici(nil, nil, nil, nil, []loadedItem{{name, item}})
	if err != nil {
		return err
	}
	p := cfg.Pools[0]
	if n.cfg.Pool(p.Name) != nil {
		return fmt.Errorf("pool %q %w", p.Name, errFromFile)
	}
	for _, other := range append(slices.Clone(n.cfg.Pools), n.loaded.pools...) {
		if other.Name != p.Name && p.Overlaps(&other) {
			return fmt.Errorf("addrs %s overlaps pool %s (%s): two clients could get one address", p.Addrs, other.Name, other.Addrs)
		}
	}
	pools := slices.Clone(n.loaded.pools)
	i := slices.IndexFunc(pools, func(q config.Pool) bool { return q.Name == p.Name })
	if i < 0 {
		return n.applyPoolsLocked(append(pools, p))
	}
	old := pools[i]
	pools[i] = p
	if old.Addrs == p.Addrs {
		return n.applyPoolsLocked(pools) // the same pool, its leases kept
	}
	undo, online := n.retirePool(p.Name)
	if online > 0 {
		return fmt.Errorf("vici pool %s has %d online leases, unable to replace its addrs %s", p.Name, online, old.Addrs)
	}
	if err := n.applyPoolsLocked(pools); err != nil {
		undo()
		return err
	}
	return nil
}

// UnloadPool removes a pool of vici's, refused while a client is online
// with a lease of it (as charon); its offline leases go with it.
func (b *backend) UnloadPool(name string) error {
	n := (*Daemon)(b)
	n.mu.Lock()
	defer n.mu.Unlock()
	i := slices.IndexFunc(n.loaded.pools, func(q config.Pool) bool { return q.Name == name })
	switch {
	case i < 0 && n.cfg != nil && n.cfg.Pool(name) != nil:
		return fmt.Errorf("pool %q %w", name, errFromFile)
	case i < 0:
		return fmt.Errorf("%w: no pool %q loaded over vici", control.ErrNotFound, name)
	}
	undo, online := n.retirePool(name)
	if online > 0 {
		return fmt.Errorf("%s has %d online leases, unable to unload", name, online)
	}
	if err := n.applyPoolsLocked(slices.Delete(slices.Clone(n.loaded.pools), i, i+1)); err != nil {
		undo()
		return err
	}
	return nil
}

// retirePool stops the running pool name handing out addresses, for its
// removal or replacement, unless a lease of it is online: then it
// returns how many are (pool.Pool.Retire: no client takes an address
// between the check and the removal). undo hands out addresses again.
func (n *Daemon) retirePool(name string) (undo func(), online int) {
	if set := n.pools.pools(); set != nil {
		if p := set.Pool(name); p != nil {
			return p.Unretire, p.Retire()
		}
	}
	return func() {}, 0
}

// applyPoolsLocked makes pools vici's, the running pool set the file's
// and vici's, and hands IKE the connections again: remote_ts dynamic of
// those naming a vici pool admits its addresses. n.mu is held.
func (n *Daemon) applyPoolsLocked(pools []config.Pool) error {
	prev := n.loaded.pools
	n.loaded.pools = pools
	n.syncPoolSet(n.cfg)
	if err := n.applyViciLocked(n.loaded.conns); err != nil {
		n.loaded.pools = prev
		n.syncPoolSet(n.cfg)
		return err
	}
	return nil
}

// viciPools returns vici's pools that cfg leaves room for: those whose
// names and addresses none of the file's pools takes. n.mu is held, or
// the daemon is starting.
func (n *Daemon) viciPools(cfg *config.Config) []config.Pool {
	var out []config.Pool
	for _, p := range n.loaded.pools {
		if clash := filePoolClash(cfg, &p); clash != "" {
			n.log.WithField("pool", p.Name).Warnf("vici: the config file took this pool's %s: the pool loaded over vici is left out", clash)
			continue
		}
		out = append(out, p)
	}
	return out
}

// filePoolClash says what of p the file's pools take: its name or its
// addresses; "" when nothing.
func filePoolClash(cfg *config.Config, p *config.Pool) string {
	if cfg == nil {
		return ""
	}
	for i := range cfg.Pools {
		switch fp := &cfg.Pools[i]; {
		case fp.Name == p.Name:
			return "name"
		case fp.Overlaps(p):
			return "addresses (pool " + fp.Name + ")"
		}
	}
	return ""
}

// syncPoolSet makes the running pool set cfg's pools and vici's: a pool
// of the same name and addresses keeps its leases (pool.Set.Replace).
func (n *Daemon) syncPoolSet(cfg *config.Config) {
	set := n.pools.pools()
	if set == nil {
		return // started by startPools, which reads the file's alone
	}
	all := cfg.IKEConfig.AddPools(n.viciPools(cfg)).PoolSet().Pools()
	if err := set.Replace(all...); err != nil {
		n.pools.log.WithError(err).Error("pools")
	}
}
