package ikenode

import (
	"net/netip"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/pool"
)

// poolVIPs is the engine's VirtualIPs of a connection with pools: the
// daemon's address pools (Config.Pools), tried in the connection's
// order, and what its config says of each pool (DNS servers, split
// include, DNS domains). Safe for concurrent use, as pool.Set is.
type poolVIPs struct {
	set   *pool.Set
	names []string
	attrs map[string]config.Pool // by pool name: its DNS, subnets, domains
}

// vipsFor returns the VirtualIPs of connection cn, nil without pools.
func vipsFor(set *pool.Set, ic *config.IKEConfig, cn *config.Connection) ike.VirtualIPs {
	if set == nil || len(cn.Pools) == 0 {
		return nil
	}
	v := &poolVIPs{set: set, names: cn.Pools, attrs: map[string]config.Pool{}}
	for _, name := range cn.Pools {
		if p := ic.Pool(name); p != nil {
			v.attrs[name] = *p
		}
	}
	return v
}

func (v *poolVIPs) Acquire(identity string, requested netip.Addr, peer netip.AddrPort) (ike.Lease, error) {
	a, p, err := v.set.Acquire(v.names, identity, requested, peer)
	if err != nil {
		return ike.Lease{}, err
	}
	at := v.attrs[p.Name()]
	return ike.Lease{Addr: a, Identity: identity, Pool: p.Name(), DNS: at.DNS, Subnets: at.SplitInclude, Domains: at.DNSDomains}, nil
}

func (v *poolVIPs) Release(l ike.Lease) {
	if !l.Assigned { // RADIUS's address was never the pool's
		v.set.Release(l.Pool, l.Identity, l.Addr)
	}
}
