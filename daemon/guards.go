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
	"github.com/ipsecd/ipsecd/internal/parallel"
	"github.com/ipsecd/ipsecd/tun"
	"github.com/ipsecd/ipsecd/xfrmif"
)

// guardTable is the kernel's routing table as the guards see it;
// *tun.Guards is the real one, fakeGuardTable (guards_test.go) a map.
type guardTable interface {
	Add(tun.Guard) error
	Remove(tun.Guard) error
	List() ([]tun.Guard, error)
	Close() error
}

// guards keeps the fail-closed guard routes (tun.Guard) in step with the
// running config: one for each route and each address prefix of every
// interface, so that once the daemon is gone (and its TUN devices with
// it) nothing it routed into a tunnel can leave by another route in
// clear. Guards outlive the process on purpose: a crash leaves them, the
// next start adopts those its config still wants and removes the others,
// and a clean stop removes them unless fail_closed.keep_on_stop says to
// keep them. See docs/design.md, "Fail closed".
//
// A nil *guards does nothing (tests that run a node without a kernel).
// Safe for concurrent use.
type guards struct {
	log   logrus.FieldLogger
	table guardTable

	mu sync.Mutex
	// mu guards: have, leftover.
	have map[tun.Guard]bool // installed or adopted by this process
	// leftover holds the guards a previous run left and this one
	// adopted: a start that fails leaves them, as it found them.
	leftover map[tun.Guard]bool
	// configured are the guards the config wants (the last adopt, sync
	// or ensure); dynamic those of a road warrior's routes, with the
	// number of routes of each (guards_dynamic.go). sync keeps both.
	configured map[tun.Guard]bool
	dynamic    map[tun.Guard]int
}

// openGuards opens the kernel's routing table in the calling thread's
// network namespace and adopts it for cfg (see adopt). When adopt fails,
// the guards are returned with the error, for the caller's close to
// undo what was added.
func openGuards(cfg *config.Config, log logrus.FieldLogger) (*guards, error) {
	t, err := tun.OpenGuards()
	if err != nil {
		return nil, fmt.Errorf("fail-closed guards: %w", err)
	}
	g := &guards{log: log, table: t}
	return g, g.adopt(wantGuards(cfg, nil))
}

// adopt takes over the guards a previous run left: those in want stay
// (the prefix is never unguarded, not even during the start), the others
// are removed; then the missing ones of want are added. Each step is
// logged, with the guards named, so that an operator sees what a crash
// left and what was cleaned.
func (g *guards) adopt(want []tun.Guard) error {
	found, err := g.table.List()
	if err != nil {
		return fmt.Errorf("fail-closed guards: %w", err)
	}
	wanted := make(map[tun.Guard]bool, len(want))
	for _, gd := range want {
		wanted[gd] = true
	}
	g.mu.Lock()
	g.have = map[tun.Guard]bool{}
	g.leftover = map[tun.Guard]bool{}
	var adopted, unwanted []tun.Guard
	for _, gd := range found {
		if wanted[gd] {
			g.have[gd], g.leftover[gd] = true, true
			adopted = append(adopted, gd)
			continue
		}
		unwanted = append(unwanted, gd)
	}
	removed, errs := g.each(unwanted, g.table.Remove)
	g.mu.Unlock()
	if len(adopted) != 0 {
		g.log.WithField("guards", guardList(adopted)).Infof("fail-closed guards left by a previous run: adopted %d", len(adopted))
	}
	if len(removed) != 0 {
		g.log.WithField("guards", guardList(removed)).Infof("fail-closed guards left by a previous run: removed %d that the config no longer routes", len(removed))
	}
	errs = append(errs, g.sync(want))
	g.log.Infof("fail-closed guards in place: %d (ip [-6] route show table all proto %d)", g.count(), tun.GuardProto)
	return errors.Join(errs...)
}

// sync adds the guards of want that are missing, then removes those this
// process has that want does not name. Adding comes first, so that a
// change never leaves a wanted prefix unguarded.
func (g *guards) sync(want []tun.Guard) error {
	if g == nil {
		return nil
	}
	err := g.ensure(want)
	wanted := make(map[tun.Guard]bool, len(want))
	for _, gd := range want {
		wanted[gd] = true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.configured = maps.Clone(wanted)
	for gd := range g.dynamic {
		wanted[gd] = true
	}
	var unwanted []tun.Guard
	for _, gd := range sortedGuards(g.have) {
		if !wanted[gd] {
			unwanted = append(unwanted, gd)
		}
	}
	removed, errs := g.each(unwanted, g.table.Remove)
	for _, gd := range removed {
		delete(g.have, gd)
		delete(g.leftover, gd)
		g.log.WithField("guard", gd.String()).Debug("fail-closed guard removed")
	}
	return errors.Join(append(errs, err)...)
}

// ensure adds the guards of want that are missing and removes none.
func (g *guards) ensure(want []tun.Guard) error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.have == nil {
		g.have = map[tun.Guard]bool{}
	}
	if g.configured == nil {
		g.configured = map[tun.Guard]bool{}
	}
	var missing []tun.Guard
	for _, gd := range want {
		g.configured[gd] = true
		if !g.have[gd] {
			missing = append(missing, gd)
		}
	}
	added, errs := g.each(missing, g.table.Add)
	for _, gd := range added {
		g.have[gd] = true
		g.log.WithField("guard", gd.String()).Debug("fail-closed guard added")
	}
	return errors.Join(errs...)
}

// guardParallelism bounds the guard routes added or removed at once.
// Each is a netlink round trip whose kernel work is short: one by one,
// the 40,000 guards of 10,000 interfaces took seconds.
const guardParallelism = 8

// each runs op (the table's Add or Remove) for every guard of gds on
// up to guardParallelism goroutines, and returns, in gds's order, the
// guards it succeeded for and the errors of the others.
func (g *guards) each(gds []tun.Guard, op func(tun.Guard) error) (done []tun.Guard, errs []error) {
	res := make([]error, len(gds))
	parallel.For(len(gds), guardParallelism, func(i int) { res[i] = op(gds[i]) })
	for i, err := range res {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		done = append(done, gds[i])
	}
	return done, errs
}

func (g *guards) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.have)
}

// close ends the guards' part in a stop. keep leaves every guard in the
// kernel (fail_closed.keep_on_stop); otherwise they are removed, except,
// when the start failed (failedStart), those a previous run left: a start
// that fails leaves the kernel as closed as it found it. It logs what it
// did.
func (g *guards) close(keep, failedStart bool) error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	defer g.table.Close()
	if keep {
		g.log.WithField("guards", guardList(sortedGuards(g.have))).
			Infof("fail-closed guards kept: %d (fail_closed.keep_on_stop); the next start adopts them", len(g.have))
		return nil
	}
	var remove []tun.Guard
	kept := 0
	for _, gd := range sortedGuards(g.have) {
		if failedStart && g.leftover[gd] {
			kept++
			continue
		}
		remove = append(remove, gd)
	}
	removed, errs := g.each(remove, g.table.Remove)
	for _, gd := range removed {
		delete(g.have, gd)
	}
	if kept != 0 {
		g.log.Infof("fail-closed guards removed: %d; kept the %d a previous run left", len(removed), kept)
	} else {
		g.log.Infof("fail-closed guards removed: %d", len(removed))
	}
	return errors.Join(errs...)
}

// wantGuards returns the guards cfg calls for, and those of what the
// registry's interfaces have applied (reg may be nil): a route or address
// a reload failed to remove stays guarded until it is gone.
func wantGuards(cfg *config.Config, reg *xfrmif.Registry) []tun.Guard {
	set := map[tun.Guard]bool{}
	add := func(table uint32, routes, addrs []netip.Prefix) {
		for _, p := range routes {
			set[tun.Guard{Table: table, Prefix: p.Masked()}] = true
		}
		// The kernel routes an address's subnet into its interface
		// (proto kernel, main table): that prefix is routed into the
		// tunnel too.
		for _, p := range addrs {
			if p.Bits() < p.Addr().BitLen() {
				set[tun.Guard{Prefix: p.Masked()}] = true
			}
		}
	}
	for _, ifc := range cfg.Interfaces {
		add(ifc.Table, ifc.Routes, ifc.Addresses)
	}
	if reg != nil {
		for _, ifc := range reg.All() {
			c := ifc.Config()
			add(c.Table, c.Routes, c.Addresses)
		}
	}
	return sortedGuards(set)
}

func sortedGuards(set map[tun.Guard]bool) []tun.Guard {
	return slices.SortedFunc(maps.Keys(set), func(a, b tun.Guard) int {
		if a.Table != b.Table {
			return int(int64(a.Table) - int64(b.Table))
		}
		if c := a.Prefix.Addr().Compare(b.Prefix.Addr()); c != 0 {
			return c
		}
		return a.Prefix.Bits() - b.Prefix.Bits()
	})
}

// guardList names guards for a log field: "203.0.113.0/24, 2001:db8:b::/64 table 100".
func guardList(gs []tun.Guard) string {
	names := make([]string, len(gs))
	for i, gd := range gs {
		names[i] = gd.Prefix.String()
		if gd.Table != 0 {
			names[i] += fmt.Sprintf(" table %d", gd.Table)
		}
	}
	return strings.Join(names, ", ")
}

// ReportGuards writes to w which fail-closed guards of the calling
// thread's network namespace a start with c would keep and which it
// would remove (ipsecd check): after a crash, what `ipsecd run` will
// clean. It changes nothing, and says nothing when there are none or
// they cannot be read.
func ReportGuards(w io.Writer, file string, c *config.Config) {
	t, err := tun.OpenGuards()
	if err != nil {
		return
	}
	defer t.Close()
	found, err := t.List()
	if err != nil || len(found) == 0 {
		return
	}
	want := map[tun.Guard]bool{}
	for _, g := range wantGuards(c, nil) {
		want[g] = true
	}
	var keep, remove []tun.Guard
	for _, g := range found {
		if want[g] {
			keep = append(keep, g)
		} else {
			remove = append(remove, g)
		}
	}
	fmt.Fprintf(w, "%s: fail-closed guards in this network namespace: %d; a start with this file keeps %d and removes %d\n",
		file, len(found), len(keep), len(remove))
	if len(keep) != 0 {
		fmt.Fprintf(w, "  keeps: %s\n", guardList(keep))
	}
	if len(remove) != 0 {
		fmt.Fprintf(w, "  removes: %s\n", guardList(remove))
	}
}
