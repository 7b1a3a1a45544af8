package tun

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The rules and throw routes of a road warrior's routing table (rules.go),
// through the same netlink share as the guards.

// AddRule installs r. A rule that is there already is not an error.
func (g *Guards) AddRule(r Rule) error {
	err := g.nl.do(func(h *netlink.Handle) error { return h.RuleAdd(ruleOf(r)) })
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("tun: add %v: %w", r, err)
	}
	return nil
}

// RemoveRule deletes r; one that is not there is not an error. Only a
// rule with all of r's marks (protocol GuardProto) is deleted.
func (g *Guards) RemoveRule(r Rule) error {
	err := g.nl.do(func(h *netlink.Handle) error { return h.RuleDel(ruleOf(r)) })
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("tun: remove %v: %w", r, err)
	}
	return nil
}

// Rules returns the rules of both families with protocol GuardProto.
func (g *Guards) Rules() ([]Rule, error) {
	var out []Rule
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		var rules []netlink.Rule
		err := g.nl.do(func(h *netlink.Handle) (err error) {
			for range listTries {
				rules, err = h.RuleList(fam)
				if !errors.Is(err, netlink.ErrDumpInterrupted) {
					break
				}
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("tun: list rules: %w", err)
		}
		for _, nr := range rules {
			if nr.Protocol != GuardProto || nr.Priority < 0 || nr.Table <= 0 {
				continue
			}
			r := Rule{IPv6: fam == netlink.FAMILY_V6, Priority: uint32(nr.Priority), Table: uint32(nr.Table)}
			if nr.Invert {
				r.NotMark = nr.Mark
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// ruleOf is r as the netlink library's rule.
func ruleOf(r Rule) *netlink.Rule {
	nr := netlink.NewRule()
	nr.Family = netlink.FAMILY_V4
	if r.IPv6 {
		nr.Family = netlink.FAMILY_V6
	}
	nr.Priority = int(r.Priority)
	nr.Table = int(r.Table)
	nr.Protocol = GuardProto
	if r.NotMark != 0 {
		mask := uint32(0xffffffff)
		nr.Mark, nr.Mask, nr.Invert = r.NotMark, &mask, true
	}
	return nr
}

// AddThrow installs th. One that is there already is not an error.
func (g *Guards) AddThrow(th Throw) error {
	err := g.nl.do(func(h *netlink.Handle) error { return h.RouteAdd(throwRoute(th, netlink.SCOPE_UNIVERSE)) })
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("tun: add %v: %w", th, err)
	}
	return nil
}

// RemoveThrow deletes th; one that is not there is not an error.
func (g *Guards) RemoveThrow(th Throw) error {
	err := g.nl.do(func(h *netlink.Handle) error { return h.RouteDel(throwRoute(th, netlink.SCOPE_NOWHERE)) })
	if err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("tun: remove %v: %w", th, err)
	}
	return nil
}

// Throws returns the throw routes of protocol GuardProto in every table
// of both families.
func (g *Guards) Throws() ([]Throw, error) {
	routes, err := g.ours(unix.RTN_THROW)
	if err != nil {
		return nil, fmt.Errorf("tun: list throw routes: %w", err)
	}
	var out []Throw
	for _, r := range routes {
		if p, ok := routePrefix(r); ok && r.Type == unix.RTN_THROW && r.Protocol == GuardProto {
			out = append(out, Throw{Table: uint32(r.Table), Prefix: p})
		}
	}
	return out, nil
}

func throwRoute(th Throw, scope netlink.Scope) *netlink.Route {
	return &netlink.Route{
		Dst:      ipNet(th.Prefix.Masked()),
		Table:    int(th.Table),
		Protocol: GuardProto,
		Scope:    scope,
		Type:     unix.RTN_THROW,
	}
}

// AddRouteFrom routes the prefix p into the interface (in the main table,
// or Options.RouteTable) with src as the preferred source of what leaves
// by it (none when invalid), as `ip route add P dev NAME src SRC` does.
// Unlike AddRoute it never replaces a route of p that is there: a prefix
// a peer negotiated must not take over the host's own route (its default
// route, say); such a route is an error wrapping unix.EEXIST.
func (d *Device) AddRouteFrom(p netip.Prefix, src netip.Addr) error {
	r := deviceRoute(d.index, d.table, p)
	if src.IsValid() {
		r.Src = src.AsSlice()
	}
	if err := d.nl.do(func(h *netlink.Handle) error { return h.RouteAdd(r) }); err != nil {
		return fmt.Errorf("tun: %s: add route %v src %v: %w", d.name, p, src, err)
	}
	return nil
}
