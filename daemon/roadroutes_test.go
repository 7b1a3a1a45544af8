package daemon

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/ikenode"
	"github.com/ipsecd/ipsecd/tun"
	"github.com/ipsecd/ipsecd/xfrmif"
	"github.com/ipsecd/ipsecd/xfrmif/xfrmiftest"
)

// fakeRuleTable holds rules and throw routes in maps, as the kernel's
// tun.Guards does.
type fakeRuleTable struct {
	mu     sync.Mutex
	rules  map[tun.Rule]bool
	throws map[tun.Throw]bool
	closed bool
}

func (f *fakeRuleTable) AddRule(r tun.Rule) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules[r] = true
	return nil
}

func (f *fakeRuleTable) RemoveRule(r tun.Rule) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.rules, r)
	return nil
}

func (f *fakeRuleTable) Rules() ([]tun.Rule, error) { return sortedRules(f.rules), nil }

func (f *fakeRuleTable) AddThrow(th tun.Throw) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.throws[th] = true
	return nil
}

func (f *fakeRuleTable) RemoveThrow(th tun.Throw) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.throws, th)
	return nil
}

func (f *fakeRuleTable) Throws() ([]tun.Throw, error) {
	var out []tun.Throw
	for th := range f.throws {
		out = append(out, th)
	}
	return out, nil
}

func (f *fakeRuleTable) Close() error { f.closed = true; return nil }

// state is what the table holds, sorted: rules, then throw routes.
func (f *fakeRuleTable) state() string {
	var out []string
	for _, r := range sortedRules(f.rules) {
		out = append(out, r.String())
	}
	var ths []string
	for th := range f.throws {
		ths = append(ths, th.String())
	}
	slices.Sort(ths)
	return strings.Join(append(out, ths...), "; ")
}

// TestRoadRoutes: a start adopts the rule its config wants and removes
// another of a previous run and its throw route; a route that holds
// the gateway comes with one throw route, counted, and its guard, and is
// refused into the main table; a reload moves the rule, and a route of
// an interface a reload removed leaves its guard's table; a stop removes
// the rest, or with keep_on_stop keeps the rules, the throw route and
// the road warrior's guards.
func TestRoadRoutes(t *testing.T) {
	rule := func(prio uint32, v6 bool) tun.Rule {
		return tun.Rule{IPv6: v6, Priority: prio, Table: 220, NotMark: 0x100}
	}
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprint("keep_on_stop ", keep), func(t *testing.T) {
			f := &fakeRuleTable{rules: map[tun.Rule]bool{rule(220, false): true, rule(300, false): true},
				throws: map[tun.Throw]bool{{Table: 220, Prefix: netip.MustParsePrefix("192.0.2.9/32")}: true}}
			g, gt, _ := newFakeGuards(t)
			reg := &xfrmif.Registry{}
			for _, c := range []xfrmif.Config{{Name: "ipsec1", IfID: 1, Table: 220}, {Name: "ipsec2", IfID: 2}} {
				ifc, err := xfrmif.NewInterface(c, xfrmiftest.NewIdleLink(1))
				if err != nil {
					t.Fatal(err)
				}
				if err := reg.Add(ifc); err != nil {
					t.Fatal(err)
				}
			}
			cfg := &config.Config{Underlay: config.Underlay{Mark: 0x100}, Interfaces: []config.Interface{{Name: "ipsec1", IfID: 1, Table: 220, RulePriority: 220}}}
			r := &roadRoutes{log: g.log, reg: reg, guards: g, table: f, rules: map[tun.Rule]bool{}, leftover: map[tun.Rule]bool{}, throws: map[tun.Throw]int{},
				tables: map[routeID]uint32{}}
			if err := r.adopt(wantRules(cfg)); err != nil {
				t.Fatal(err)
			}
			if got, want := f.state(), "ip -6 rule priority 220 not fwmark 0x100 lookup 220 proto 90; ip rule priority 220 not fwmark 0x100 lookup 220 proto 90"; got != want {
				t.Errorf("after the start: %s, want %s", got, want)
			}

			gw := netip.MustParseAddr("192.0.2.2")
			all := ikenode.Route{IfID: 1, Prefix: netip.MustParsePrefix("0.0.0.0/0"), Src: netip.MustParseAddr("10.3.0.7"), Gateway: gw, Child: "net"}
			half := all
			half.Prefix = netip.MustParsePrefix("192.0.0.0/2")
			for _, rt := range []ikenode.Route{all, half} {
				if err := r.AddRoute(rt); err != nil {
					t.Fatal(err)
				}
			}
			if got := f.state(); !strings.HasSuffix(got, "; throw 192.0.2.2/32 table 220 proto 90") {
				t.Errorf("with the full tunnel: %s, want the gateway's throw route", got)
			}
			if got := gt.prefixes(); fmt.Sprint(got) != "[0.0.0.0/0 table 220 192.0.0.0/2 table 220]" {
				t.Errorf("guards: %v", got)
			}
			main := all
			main.IfID = 2
			if err := r.AddRoute(main); !errors.Is(err, ErrGatewayInTunnel) || !strings.Contains(err.Error(), `child "net": 0.0.0.0/0 into ipsec2`) {
				t.Errorf("into the main table: %v, want ErrGatewayInTunnel naming the child", err)
			}
			if err := r.RemoveRoute(half); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(f.state(), "throw 192.0.2.2/32") {
				t.Error("the throw route went with the first of its two routes")
			}
			if err := r.RemoveRoute(all); err != nil {
				t.Fatal(err)
			}
			if got := f.state(); strings.Contains(got, "throw") || len(gt.prefixes()) != 0 {
				t.Errorf("after both routes went: %s, guards %v", got, gt.prefixes())
			}

			cfg.Interfaces[0].RulePriority = 221
			if err := r.sync(wantRules(cfg)); err != nil {
				t.Fatal(err)
			}
			if got, want := f.state(), "ip -6 rule priority 221 not fwmark 0x100 lookup 220 proto 90; ip rule priority 221 not fwmark 0x100 lookup 220 proto 90"; got != want {
				t.Errorf("after a reload: %s, want %s", got, want)
			}
			for _, rt := range []ikenode.Route{all, half} {
				if err := r.AddRoute(rt); err != nil {
					t.Fatal(err)
				}
			}
			// A reload removed the interface: the guard goes from the
			// table the route was in.
			reg.Remove(1)
			if err := r.RemoveRoute(half); err != nil {
				t.Fatal(err)
			}
			if got := gt.prefixes(); fmt.Sprint(got) != "[0.0.0.0/0 table 220]" {
				t.Errorf("guards after the interface went and a route with it: %v, want 0.0.0.0/0's alone", got)
			}
			// The stop: IKE removes the children's routes first.
			if keep {
				r.freeze()
			}
			if err := r.RemoveRoute(all); err != nil {
				t.Fatal(err)
			}
			if err := r.close(keep, false); err != nil {
				t.Fatal(err)
			}
			want, wantGuards := "", "[]"
			if keep {
				want = "ip -6 rule priority 221 not fwmark 0x100 lookup 220 proto 90; ip rule priority 221 not fwmark 0x100 lookup 220 proto 90; throw 192.0.2.2/32 table 220 proto 90"
				wantGuards = "[0.0.0.0/0 table 220]"
			}
			if got := f.state(); got != want || !f.closed {
				t.Errorf("after the stop: %q (closed %v), want %q", got, f.closed, want)
			}
			if got := fmt.Sprint(gt.prefixes()); got != wantGuards {
				t.Errorf("guards after the stop (before the guards' own close): %s, want %s", got, wantGuards)
			}
		})
	}
}
