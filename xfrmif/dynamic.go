package xfrmif

import (
	"errors"
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
	return ifc.addDynamic(p, "adding", func(c *Config) []netip.Prefix { return c.Addresses }, ifc.link.AddAddress)
}

// RemoveDynamicAddress takes p, which AddDynamicAddress added, off the
// interface; an address the config holds (since a reload) stays.
func (ifc *Interface) RemoveDynamicAddress(p netip.Prefix) error {
	err := ifc.removeDynamic(p, "removing", func(c *Config) []netip.Prefix { return c.Addresses }, ifc.link.RemoveAddress)
	if err != nil || !p.Addr().Unmap().Is4() {
		return err
	}
	// Removing a device's last IPv4 address makes Linux flush every IPv4
	// route through it (fib_disable_ip), the config's too: a road
	// warrior whose interface has no address but its virtual IP lost
	// them when its IKE SA went, and they stayed lost when it came back.
	// Put them back, as Reconfigure does; AddRoute replaces, so a route
	// still there is left as it is.
	return ifc.reapplyIPv4Routes()
}

// reapplyIPv4Routes adds the config's IPv4 routes again.
func (ifc *Interface) reapplyIPv4Routes() error {
	ifc.mu.Lock()
	defer ifc.mu.Unlock()
	if ifc.closed.Load() {
		return nil
	}
	var errs []error
	for _, r := range ifc.cfg.Routes {
		if r.Addr().Unmap().Is4() {
			errs = append(errs, ifc.link.AddRoute(r))
		}
	}
	return errors.Join(errs...)
}

// AddDynamicRoute routes p into the interface beside its config's
// routes: one that IKE negotiated at run time (a road warrior's remote
// traffic selector), with src (a virtual IP; none when invalid) as the
// preferred source of what leaves by it. As AddDynamicAddress: Reconfigure
// leaves it, a route the config holds already is left as it is (false).
// On a link that takes a source (a TUN device, sourceRouteLink) a route
// of p that is in the table already is an error, never replaced; a link
// without one (a netstack NIC, which picks its own source) gets p alone.
func (ifc *Interface) AddDynamicRoute(p netip.Prefix, src netip.Addr) (added bool, err error) {
	add := ifc.link.AddRoute
	if l, ok := ifc.link.(sourceRouteLink); ok {
		add = func(p netip.Prefix) error { return l.AddRouteFrom(p, src) }
	}
	return ifc.addDynamic(p, "adding route", func(c *Config) []netip.Prefix { return c.Routes }, add)
}

// sourceRouteLink is a Link whose routes name a preferred source address
// (a TUN device: tun.Device.AddRouteFrom).
type sourceRouteLink interface {
	AddRouteFrom(p netip.Prefix, src netip.Addr) error
}

// RemoveDynamicRoute removes p, which AddDynamicRoute added; a route the
// config holds (since a reload) stays.
func (ifc *Interface) RemoveDynamicRoute(p netip.Prefix) error {
	return ifc.removeDynamic(p, "removing route", func(c *Config) []netip.Prefix { return c.Routes }, ifc.link.RemoveRoute)
}

// addDynamic applies p with add unless the config's list (of) holds it.
func (ifc *Interface) addDynamic(p netip.Prefix, what string, of func(*Config) []netip.Prefix, add func(netip.Prefix) error) (bool, error) {
	ifc.mu.Lock()
	defer ifc.mu.Unlock()
	if ifc.closed.Load() {
		return false, ErrClosed
	}
	if slices.Contains(of(&ifc.cfg), p) {
		return false, nil
	}
	if err := add(p); err != nil {
		return false, fmt.Errorf("xfrmif: %s: %s %s: %w", ifc.name, what, p, err)
	}
	return true, nil
}

// removeDynamic undoes addDynamic, leaving what the config holds.
func (ifc *Interface) removeDynamic(p netip.Prefix, what string, of func(*Config) []netip.Prefix, remove func(netip.Prefix) error) error {
	ifc.mu.Lock()
	defer ifc.mu.Unlock()
	if ifc.closed.Load() || slices.Contains(of(&ifc.cfg), p) {
		return nil
	}
	if err := remove(p); err != nil {
		return fmt.Errorf("xfrmif: %s: %s %s: %w", ifc.name, what, p, err)
	}
	return nil
}
