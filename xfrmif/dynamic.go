package xfrmif

import (
	"fmt"
	"net/netip"
	"slices"
)

// AddDynamicAddress puts p on the interface beside its config's
// addresses: one that IKE got at run time (a virtual IP a gateway gave
// us). Reconfigure leaves it alone, as it is not in the config; an
// address the config holds already is left as it is (false). It reports
// whether it added p, for RemoveDynamicAddress.
func (ifc *Interface) AddDynamicAddress(p netip.Prefix) (added bool, err error) {
	ifc.mu.Lock()
	defer ifc.mu.Unlock()
	if ifc.closed.Load() {
		return false, ErrClosed
	}
	if slices.Contains(ifc.cfg.Addresses, p) {
		return false, nil
	}
	if err := ifc.link.AddAddress(p); err != nil {
		return false, fmt.Errorf("xfrmif: %s: adding %s: %w", ifc.name, p, err)
	}
	return true, nil
}

// RemoveDynamicAddress takes p, which AddDynamicAddress added, off the
// interface; an address the config holds (since a reload) stays.
func (ifc *Interface) RemoveDynamicAddress(p netip.Prefix) error {
	ifc.mu.Lock()
	defer ifc.mu.Unlock()
	if ifc.closed.Load() || slices.Contains(ifc.cfg.Addresses, p) {
		return nil
	}
	if err := ifc.link.RemoveAddress(p); err != nil {
		return fmt.Errorf("xfrmif: %s: removing %s: %w", ifc.name, p, err)
	}
	return nil
}
