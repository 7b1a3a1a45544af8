package daemon

import (
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/internal/syncbuf"
	"github.com/ipsecd/ipsecd/tun"
)

// fakeGuardTable is a routing table of guards in a map, with the order of
// the calls made to it. Safe for concurrent use, as tun.Guards is.
type fakeGuardTable struct {
	mu     sync.Mutex
	routes map[tun.Guard]bool
	calls  []string
	closed bool
}

func (f *fakeGuardTable) Add(g tun.Guard) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.routes[g] = true
	f.calls = append(f.calls, "add "+g.Prefix.String())
	return nil
}

func (f *fakeGuardTable) Remove(g tun.Guard) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.routes, g)
	f.calls = append(f.calls, "remove "+g.Prefix.String())
	return nil
}

func (f *fakeGuardTable) List() ([]tun.Guard, error) { return sortedGuards(f.routes), nil }
func (f *fakeGuardTable) Close() error               { f.closed = true; return nil }

func (f *fakeGuardTable) prefixes() []string {
	var out []string
	for _, g := range sortedGuards(f.routes) {
		out = append(out, guardList([]tun.Guard{g}))
	}
	return out
}

func guard(table uint32, p string) tun.Guard {
	return tun.Guard{Table: table, Prefix: netip.MustParsePrefix(p)}
}

func newFakeGuards(t *testing.T, left ...tun.Guard) (*guards, *fakeGuardTable, *syncbuf.Buffer) {
	t.Helper()
	f := &fakeGuardTable{routes: map[tun.Guard]bool{}}
	for _, g := range left {
		f.routes[g] = true
	}
	out := &syncbuf.Buffer{}
	log := logrus.New()
	log.SetOutput(out)
	log.SetFormatter(&logrus.TextFormatter{DisableTimestamp: true})
	return &guards{log: log, table: f}, f, out
}

// TestWantGuards: every route, in its interface's table, and the subnet of
// every address (in main), but not a host address, which has no subnet
// route.
func TestWantGuards(t *testing.T) {
	cfg := &config.Config{Interfaces: []config.Interface{
		{Name: "ipsec1", IfID: 1, Addresses: prefixes("198.51.100.1/24", "2001:db8:a::1/64", "192.0.2.9/32"), Routes: prefixes("203.0.113.0/24")},
		{Name: "ipsec2", IfID: 2, Table: 100, Routes: prefixes("192.0.2.2/32", "2001:db8:ff::2/128")},
	}}
	got := guardList(wantGuards(cfg, nil))
	want := "198.51.100.0/24, 203.0.113.0/24, 2001:db8:a::/64, 192.0.2.2/32 table 100, 2001:db8:ff::2/128 table 100"
	if got != want {
		t.Errorf("wantGuards = %s, want %s", got, want)
	}
}

// TestGuardsAdopt: a start keeps the guards a crash left that the config
// wants (never removed and added again, so the prefix is never open),
// removes the others, adds the missing ones, and says which.
func TestGuardsAdopt(t *testing.T) {
	g, f, out := newFakeGuards(t, guard(0, "203.0.113.0/24"), guard(0, "100.64.2.0/24"))
	if err := g.adopt([]tun.Guard{guard(0, "203.0.113.0/24"), guard(100, "192.0.2.2/32")}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"remove 100.64.2.0/24", "add 192.0.2.2/32"}; !slices.Equal(f.calls, want) {
		t.Errorf("calls %q, want %q", f.calls, want)
	}
	if got, want := f.prefixes(), []string{"203.0.113.0/24", "192.0.2.2/32 table 100"}; !slices.Equal(got, want) {
		t.Errorf("guards %q, want %q", got, want)
	}
	for _, want := range []string{
		`msg="fail-closed guards left by a previous run: adopted 1" guards=203.0.113.0/24`,
		`msg="fail-closed guards left by a previous run: removed 1 that the config no longer routes" guards=100.64.2.0/24`,
		`msg="fail-closed guards in place: 2 (ip [-6] route show table all proto 90)"`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("log has no %s:\n%s", want, out.String())
		}
	}
}

// TestGuardsSync: a change adds new guards before it removes old ones,
// and removes only guards of this process.
func TestGuardsSync(t *testing.T) {
	g, f, _ := newFakeGuards(t)
	g.adopt([]tun.Guard{guard(0, "203.0.113.0/24"), guard(0, "100.64.2.0/24")})
	f.routes[guard(0, "10.0.0.0/8")] = true // not ours, made since
	f.calls = nil
	if err := g.sync([]tun.Guard{guard(0, "203.0.113.0/24"), guard(0, "100.64.9.0/24")}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"add 100.64.9.0/24", "remove 100.64.2.0/24"}; !slices.Equal(f.calls, want) {
		t.Errorf("calls %q, want %q", f.calls, want)
	}
	if got, want := f.prefixes(), []string{"10.0.0.0/8", "100.64.9.0/24", "203.0.113.0/24"}; !slices.Equal(got, want) {
		t.Errorf("guards %q, want %q", got, want)
	}
}

// TestGuardsClose: a clean stop removes every guard; keep_on_stop keeps
// them; a failed start removes those it added and keeps those a previous
// run left.
func TestGuardsClose(t *testing.T) {
	left := guard(0, "203.0.113.0/24")
	want := []tun.Guard{left, guard(0, "198.51.100.0/24")}
	for _, tt := range []struct {
		name              string
		keep, failedStart bool
		stays             []string
		log               string
	}{
		{"clean stop", false, false, nil, "fail-closed guards removed: 2"},
		{"keep_on_stop", true, false, []string{"198.51.100.0/24", "203.0.113.0/24"}, "fail-closed guards kept: 2 (fail_closed.keep_on_stop)"},
		{"failed start", false, true, []string{"203.0.113.0/24"}, "fail-closed guards removed: 1; kept the 1 a previous run left"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g, f, out := newFakeGuards(t, left)
			if err := g.adopt(want); err != nil {
				t.Fatal(err)
			}
			if err := g.close(tt.keep, tt.failedStart); err != nil {
				t.Fatal(err)
			}
			if got := f.prefixes(); !slices.Equal(got, tt.stays) {
				t.Errorf("guards left %q, want %q", got, tt.stays)
			}
			if !f.closed {
				t.Error("table not closed")
			}
			if !strings.Contains(out.String(), tt.log) {
				t.Errorf("log has no %q:\n%s", tt.log, out.String())
			}
		})
	}
	var g *guards // no kernel: a node made by a test
	if err := g.sync(want); err != nil || g.close(false, false) != nil {
		t.Error("a nil *guards must do nothing")
	}
}

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}
