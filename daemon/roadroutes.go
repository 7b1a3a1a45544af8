package daemon

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/ikenode"
	"github.com/ipsecd/ipsecd/tun"
	"github.com/ipsecd/ipsecd/xfrmif"
)

// ruleTable is what roadRoutes needs of the kernel: *tun.Guards, whose
// rules and throw routes carry the guards' protocol.
type ruleTable interface {
	AddRule(tun.Rule) error
	RemoveRule(tun.Rule) error
	Rules() ([]tun.Rule, error)
	AddThrow(tun.Throw) error
	RemoveThrow(tun.Throw) error
	Throws() ([]tun.Throw, error)
	Close() error
}

// roadRoutes is the kernel's side of a road warrior's routes
// (ikenode.Router): each route of a child goes into its interface's
// table, guarded (guards_dynamic.go), and a route that holds the
// gateway's address, which only a table of the interface's own may
// take, comes with a throw route of the gateway in that table, so that
// IKE and ESP to it, and whatever else is sent to it, leave by the main
// table. It also keeps the rules that reach the tables
// (interfaces[].rule_priority): `priority P not fwmark MARK lookup T`
// in both families, so that the underlay's own packets (SO_MARK) never
// look at a tunnel's table either.
//
// Rules and throw routes are marked with the guards' protocol. A start
// adopts the rules its config wants and removes the others and every
// throw route a crashed run left; a clean stop removes them all, but
// with fail_closed.keep_on_stop the rules stay beside the guards they
// lead to. Safe for concurrent use; a nil *roadRoutes routes nothing.
type roadRoutes struct {
	log    logrus.FieldLogger
	reg    *xfrmif.Registry
	guards *guards
	table  ruleTable

	mu sync.Mutex
	// mu guards: rules, leftover, throws, tables, frozen.
	rules    map[tun.Rule]bool // installed or adopted
	leftover map[tun.Rule]bool // adopted from a previous run
	throws   map[tun.Throw]int // with the number of routes that need each
	// tables holds the table each route went into, for its removal
	// after a reload removed or replaced its interface.
	tables map[routeID]uint32
	// frozen: a stop with fail_closed.keep_on_stop is under way, and
	// RemoveRoute leaves the guards and throw routes in the kernel.
	frozen bool
}

// routeID is a road warrior's route as AddRoute was given it.
type routeID struct {
	ifID   uint32
	prefix netip.Prefix
}

var _ ikenode.Router = (*roadRoutes)(nil)

// openRoadRoutes opens the kernel's rules in the calling thread's
// network namespace and adopts them for cfg. When adopting fails, the
// roadRoutes are returned with the error, for the caller's close.
func openRoadRoutes(cfg *config.Config, reg *xfrmif.Registry, g *guards, log logrus.FieldLogger) (*roadRoutes, error) {
	t, err := tun.OpenGuards()
	if err != nil {
		return nil, fmt.Errorf("routing rules: %w", err)
	}
	r := &roadRoutes{log: log, reg: reg, guards: g, table: t, rules: map[tun.Rule]bool{}, leftover: map[tun.Rule]bool{}, throws: map[tun.Throw]int{},
		tables: map[routeID]uint32{}}
	return r, r.adopt(wantRules(cfg))
}

// wantRules returns the rules of cfg's interfaces with a rule_priority.
func wantRules(cfg *config.Config) []tun.Rule {
	var out []tun.Rule
	for _, ifc := range cfg.Interfaces {
		if ifc.RulePriority == 0 {
			continue
		}
		for _, v6 := range []bool{false, true} {
			r := tun.Rule{IPv6: v6, Priority: ifc.RulePriority, Table: ifc.Table, NotMark: cfg.Underlay.Mark}
			if !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	return out
}

// adopt keeps the rules of a previous run that want names, removes its
// other rules and every throw route it left, and adds what is missing.
func (r *roadRoutes) adopt(want []tun.Rule) error {
	found, err := r.table.Rules()
	if err != nil {
		return fmt.Errorf("routing rules: %w", err)
	}
	throws, err := r.table.Throws()
	if err != nil {
		return fmt.Errorf("routing rules: %w", err)
	}
	var errs []error
	var removed []string
	r.mu.Lock()
	for _, rule := range found {
		if slices.Contains(want, rule) {
			r.rules[rule], r.leftover[rule] = true, true
			continue
		}
		if err := r.table.RemoveRule(rule); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, rule.String())
	}
	for _, th := range throws {
		if err := r.table.RemoveThrow(th); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, th.String())
	}
	r.mu.Unlock()
	if len(removed) != 0 {
		r.log.WithField("removed", strings.Join(removed, "; ")).Infof("road warrior: rules and throw routes left by a previous run: removed %d", len(removed))
	}
	return errors.Join(append(errs, r.sync(want))...)
}

// sync adds the rules of want that are missing and removes the others
// of this process (a reload).
func (r *roadRoutes) sync(want []tun.Rule) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, rule := range want {
		if r.rules[rule] {
			continue
		}
		if err := r.table.AddRule(rule); err != nil {
			errs = append(errs, err)
			continue
		}
		r.rules[rule] = true
		r.log.WithField("rule", rule.String()).Info("road warrior: rule added")
	}
	for _, rule := range sortedRules(r.rules) {
		if slices.Contains(want, rule) {
			continue
		}
		if err := r.table.RemoveRule(rule); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(r.rules, rule)
		delete(r.leftover, rule)
		r.log.WithField("rule", rule.String()).Info("road warrior: rule removed")
	}
	return errors.Join(errs...)
}

// sortedRules returns the rules of set in the order of their text, as
// sortedGuards (guards.go) does the guards.
func sortedRules(set map[tun.Rule]bool) []tun.Rule {
	return slices.SortedFunc(maps.Keys(set), func(a, b tun.Rule) int { return strings.Compare(a.String(), b.String()) })
}

// ErrGatewayInTunnel is AddRoute's error for a route that holds the
// gateway's own address into an interface that routes into the main
// table: give the interface a table and a rule_priority.
var ErrGatewayInTunnel = errors.New("the route holds the gateway's address, and the interface routes into the main table, where IKE and ESP to the gateway would enter the tunnel: give the interface a table of its own and a rule_priority (table: 220, rule_priority: 220)")

// AddRoute puts a road warrior's route into its interface's table:
// guarded, and with the gateway thrown back to the main table when the
// route holds it.
func (r *roadRoutes) AddRoute(rt ikenode.Route) error {
	ifc := r.reg.Lookup(rt.IfID)
	if ifc == nil {
		return fmt.Errorf("child %q: no interface has if_id %d", rt.Child, rt.IfID)
	}
	table := ifc.Config().Table
	th := tun.Throw{Table: table, Prefix: netip.PrefixFrom(rt.Gateway, rt.Gateway.BitLen())}
	throw := rt.Gateway.IsValid() && rt.Prefix.Contains(rt.Gateway)
	if throw && table == 0 {
		return fmt.Errorf("child %q: %s into %s: %w", rt.Child, rt.Prefix, ifc.Name(), ErrGatewayInTunnel)
	}
	if throw {
		if err := r.addThrow(th); err != nil {
			return err
		}
	}
	gd := tun.Guard{Table: table, Prefix: rt.Prefix}
	err := r.guards.addDynamic(gd)
	if err == nil {
		if _, err = ifc.AddDynamicRoute(rt.Prefix, rt.Src); err != nil {
			r.guards.removeDynamic(gd)
		}
	}
	if err != nil && throw {
		r.removeThrow(th)
	}
	if err == nil {
		r.mu.Lock()
		r.tables[routeID{rt.IfID, rt.Prefix}] = table
		r.mu.Unlock()
	}
	return err
}

// RemoveRoute takes out what AddRoute put in.
func (r *roadRoutes) RemoveRoute(rt ikenode.Route) error {
	var errs []error
	r.mu.Lock()
	id := routeID{rt.IfID, rt.Prefix}
	table, ok := r.tables[id]
	delete(r.tables, id)
	frozen := r.frozen
	r.mu.Unlock()
	if !ok || frozen {
		return nil // AddRoute failed, or the stop keeps what went in
	}
	if ifc := r.reg.Lookup(rt.IfID); ifc != nil && ifc.Config().Table == table { // else gone, and its routes with it
		errs = append(errs, ifc.RemoveDynamicRoute(rt.Prefix))
	}
	errs = append(errs, r.guards.removeDynamic(tun.Guard{Table: table, Prefix: rt.Prefix}))
	if rt.Gateway.IsValid() && rt.Prefix.Contains(rt.Gateway) {
		errs = append(errs, r.removeThrow(tun.Throw{Table: table, Prefix: netip.PrefixFrom(rt.Gateway, rt.Gateway.BitLen())}))
	}
	return errors.Join(errs...)
}

func (r *roadRoutes) addThrow(th tun.Throw) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.throws[th] == 0 {
		if err := r.table.AddThrow(th); err != nil {
			return err
		}
		r.log.WithField("route", th.String()).Info("road warrior: the gateway stays outside the tunnel")
	}
	r.throws[th]++
	return nil
}

func (r *roadRoutes) removeThrow(th tun.Throw) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.throws[th] == 0 {
		return nil
	}
	if r.throws[th]--; r.throws[th] > 0 {
		return nil
	}
	delete(r.throws, th)
	return r.table.RemoveThrow(th)
}

// freeze has RemoveRoute leave the guards and throw routes of the routes
// it removes from now on: a stop with fail_closed.keep_on_stop keeps a
// road warrior's guards with the others, so that what its tunnels
// carried stays refused (with the gateway reachable) until the next
// start, which removes them.
func (r *roadRoutes) freeze() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frozen = true
}

// close ends the rules' part in a stop: the rules and throw routes go,
// unless keep (fail_closed.keep_on_stop, which keeps the guards they
// lead to); a start that failed leaves the rules it adopted.
func (r *roadRoutes) close(keep, failedStart bool) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	defer r.table.Close()
	var errs []error
	if keep {
		if len(r.rules)+len(r.throws) != 0 {
			r.log.Infof("road warrior: rules kept: %d, throw routes kept: %d (fail_closed.keep_on_stop); the next start adopts the rules its file names and removes the rest", len(r.rules), len(r.throws))
		}
		return nil
	}
	for th := range r.throws {
		errs = append(errs, r.table.RemoveThrow(th))
		delete(r.throws, th)
	}
	n := 0
	for _, rule := range sortedRules(r.rules) {
		if failedStart && r.leftover[rule] {
			continue
		}
		if err := r.table.RemoveRule(rule); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(r.rules, rule)
		n++
	}
	if n != 0 {
		r.log.Infof("road warrior: rules removed: %d", n)
	}
	return errors.Join(errs...)
}

// ReportRules writes to w which of the rules and throw routes a previous
// run left in the calling thread's network namespace a start with c
// would keep and which it would remove (ipsecd check, beside
// ReportGuards). It changes nothing, and says nothing when there are
// none or they cannot be read.
func ReportRules(w io.Writer, file string, c *config.Config) {
	t, err := tun.OpenGuards()
	if err != nil {
		return
	}
	defer t.Close()
	rules, err := t.Rules()
	if err != nil {
		return
	}
	throws, err := t.Throws()
	if err != nil || len(rules)+len(throws) == 0 {
		return
	}
	want := wantRules(c)
	var keep, remove []string
	for _, r := range rules {
		if slices.Contains(want, r) {
			keep = append(keep, r.String())
		} else {
			remove = append(remove, r.String())
		}
	}
	for _, th := range throws {
		remove = append(remove, th.String())
	}
	fmt.Fprintf(w, "%s: road warrior rules and throw routes in this network namespace: %d; a start with this file keeps %d and removes %d\n",
		file, len(rules)+len(throws), len(keep), len(remove))
	if len(keep) != 0 {
		fmt.Fprintf(w, "  keeps: %s\n", strings.Join(keep, "; "))
	}
	if len(remove) != 0 {
		fmt.Fprintf(w, "  removes: %s\n", strings.Join(remove, "; "))
	}
}
