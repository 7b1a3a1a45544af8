package ikenode

import (
	"net/netip"
	"slices"
	"sync/atomic"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/pool"
)

// poolVIPs is the engine's VirtualIPs of a connection with pools: the
// daemon's address pools (Config.Pools), tried in the connection's
// order, and what the config says of each pool (DNS servers, split
// include, DNS domains), read at each lease from the daemon's poolAttrs,
// so that a reload or a pool loaded again with new attributes reaches
// connections that stay. Safe for concurrent use, as pool.Set is.
type poolVIPs struct {
	set   *pool.Set
	names []string
	attrs *atomic.Pointer[map[string]config.Pool] // by pool name: its DNS, subnets, domains
}

// vipsFor returns the VirtualIPs of connection cn, nil without pools.
func (m *Daemon) vipsFor(cn *config.Connection) ike.VirtualIPs {
	if m.cfg.Pools == nil || len(cn.Pools) == 0 {
		return nil
	}
	return &poolVIPs{set: m.cfg.Pools, names: cn.Pools, attrs: &m.poolAttrs}
}

// storePoolAttrs makes ic's pools what leases are handed out with.
func (m *Daemon) storePoolAttrs(ic *config.IKEConfig) {
	attrs := make(map[string]config.Pool, len(ic.Pools))
	for _, p := range ic.Pools {
		attrs[p.Name] = p
	}
	m.poolAttrs.Store(&attrs)
}

func (v *poolVIPs) Acquire(identity string, requested netip.Addr, peer netip.AddrPort) (ike.Lease, error) {
	a, p, err := v.set.Acquire(v.names, identity, requested, peer)
	if err != nil {
		return ike.Lease{}, err
	}
	var at config.Pool
	if attrs := v.attrs.Load(); attrs != nil {
		at = (*attrs)[p.Name()]
	}
	return ike.Lease{Addr: a, Identity: identity, Pool: p.Name(), DNS: at.DNS, Subnets: at.SplitInclude, Domains: at.DNSDomains}, nil
}

func (v *poolVIPs) Release(l ike.Lease) {
	if !l.Assigned { // RADIUS's address was never the pool's
		v.set.Release(l.Pool, l.Identity, l.Addr)
	}
}

// virtualIPNode is a Node that holds the virtual IPs a gateway gives us
// on the child's interface: node.Node, for a TUN device and for the
// sidecar's netstack alike.
type virtualIPNode interface {
	AddVirtualIP(ifID uint32, a netip.Addr) (bool, error)
	RemoveVirtualIP(ifID uint32, a netip.Addr) error
}

// vipKey is a virtual IP on an interface that IKE put there.
type vipKey struct {
	ifID uint32
	addr netip.Addr
}

// vipInterface is the interface of x's virtual IPs: its connection's
// first child's.
func vipInterface(x *ikeSA) uint32 { return x.conn.cfg.Children[0].IfID }

// addVIPs puts the virtual IPs the gateway gave x on its interface,
// those no other SA of the connection holds already (the one an IKE
// rekey replaced).
func (m *Daemon) addVIPs(x *ikeSA) {
	vn, ok := m.cfg.Node.(virtualIPNode)
	if !ok {
		return
	}
	for _, a := range x.sa.LocalVirtualIPs() {
		k := vipKey{vipInterface(x), a}
		if m.vipsAdded[k] {
			continue
		}
		added, err := vn.AddVirtualIP(k.ifID, a)
		if err != nil {
			m.log.WithFields(x.fields()).WithError(err).Error("ike: the virtual IP the gateway gave cannot go on the interface")
			continue
		}
		if added {
			m.vipsAdded[k] = true
		}
	}
}

// dropVIPs takes x's virtual IPs off its interface when x ended and no
// other live SA of its connection holds them (an IKE rekey's successor
// does), those addVIPs put there.
func (m *Daemon) dropVIPs(x *ikeSA) {
	vn, ok := m.cfg.Node.(virtualIPNode)
	if !ok {
		return
	}
	for _, a := range x.sa.LocalVirtualIPs() {
		k := vipKey{vipInterface(x), a}
		held := slices.ContainsFunc(m.sas, func(y *ikeSA) bool {
			return y != x && !y.ended && y.conn == x.conn && slices.Contains(y.sa.LocalVirtualIPs(), a)
		})
		if held || !m.vipsAdded[k] {
			continue
		}
		delete(m.vipsAdded, k)
		if err := vn.RemoveVirtualIP(k.ifID, a); err != nil {
			m.log.WithFields(x.fields()).WithError(err).Warn("ike: removing the virtual IP from the interface")
		}
	}
}
