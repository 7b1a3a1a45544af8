package node

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/ipsecd/ipsecd/xfrmif"
)

// SyncInterfaces makes the registry's interfaces those of cfgs (see
// xfrmif.Registry.Sync), starts the sending workers of new and replaced
// interfaces, and stops those of removed ones (restarting those whose
// MTU outgrew their buffers). A Node without a data path starts none.
func (n *Node) SyncInterfaces(cfgs []xfrmif.Config) (xfrmif.SyncResult, error) {
	return n.SyncInterfacesGuarded(cfgs, nil)
}

// SyncInterfacesGuarded is SyncInterfaces with the registry's
// SyncGuarded: guard runs once the new interfaces are up and before any
// is routed.
func (n *Node) SyncInterfacesGuarded(cfgs []xfrmif.Config, guard func() error) (xfrmif.SyncResult, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ids := map[string]uint32{} // of the interfaces before and after, for the events
	for _, ifc := range n.reg.All() {
		ids[ifc.Name()] = ifc.IfID()
	}
	res, err := n.reg.SyncGuarded(cfgs, guard)
	if n.events != nil {
		for _, c := range cfgs {
			ids[c.Name] = c.IfID
		}
		n.notifyInterfacesLocked(append(slices.Clone(res.Removed), res.Replaced...), append(slices.Clone(res.Added), res.Replaced...), ids)
	}
	n.reapWorkersLocked()
	n.startWorkersLocked(append(res.Added, res.Replaced...))
	return res, err
}

// AddInterface registers ifc, made by the caller (the netstack's link),
// and starts its sending workers. The Node owns ifc from then on, also
// when AddInterface fails (ifc is closed).
func (n *Node) AddInterface(ifc *xfrmif.Interface) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.reg.Add(ifc); err != nil {
		ifc.Close()
		return err
	}
	n.startWorkersLocked([]string{ifc.Name()})
	return nil
}

// startWorkersLocked starts the sending workers of the named interfaces
// that have none yet.
func (n *Node) startWorkersLocked(names []string) {
	if n.engine == nil {
		return
	}
	want := make(map[string]bool, len(names))
	for _, name := range names {
		want[name] = true
	}
	for _, ifc := range n.reg.All() {
		if want[ifc.Name()] && n.workers[ifc] == nil {
			n.workers[ifc] = n.engine.StartInterface(n.ctx, ifc)
		}
	}
}

// reapWorkersLocked stops the workers of interfaces no longer registered,
// and restarts those of interfaces whose MTU outgrew their buffers.
func (n *Node) reapWorkersLocked() {
	live := map[*xfrmif.Interface]bool{}
	for _, ifc := range n.reg.All() {
		live[ifc] = true
	}
	for ifc, w := range n.workers {
		switch {
		case !live[ifc]:
			w.Stop()
			delete(n.workers, ifc)
		case ifc.MTU() > w.MTU:
			w.Stop()
			n.workers[ifc] = n.engine.StartInterface(n.ctx, ifc)
		}
	}
}

// AddVirtualIP puts a, a virtual IP a gateway gave IKE, on the interface
// with ifID as a host address (xfrmif.Interface.AddDynamicAddress), so
// that packets leave from it into the child. It reports whether it added
// it (false: the config holds it already).
func (n *Node) AddVirtualIP(ifID uint32, a netip.Addr) (bool, error) {
	ifc := n.reg.Lookup(ifID)
	if ifc == nil {
		return false, fmt.Errorf("node: no interface has if_id %d for virtual IP %s", ifID, a)
	}
	return ifc.AddDynamicAddress(netip.PrefixFrom(a, a.BitLen()))
}

// RemoveVirtualIP takes a virtual IP that AddVirtualIP added off the
// interface with ifID again.
func (n *Node) RemoveVirtualIP(ifID uint32, a netip.Addr) error {
	ifc := n.reg.Lookup(ifID)
	if ifc == nil {
		return nil // the interface went, and the address with it
	}
	return ifc.RemoveDynamicAddress(netip.PrefixFrom(a, a.BitLen()))
}
