package ikenode

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/pool"
)

// fakeRouter records a road warrior's route changes, in order.
type fakeRouter struct {
	mu   sync.Mutex
	log  []string
	have map[netip.Prefix]Route
}

func (f *fakeRouter) AddRoute(r Route) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, dup := f.have[r.Prefix]; dup {
		return fmt.Errorf("route %v added twice", r.Prefix)
	}
	f.have[r.Prefix] = r
	f.log = append(f.log, fmt.Sprintf("add %v if_id %d src %v gateway %v child %s", r.Prefix, r.IfID, r.Src, r.Gateway, r.Child))
	return nil
}

func (f *fakeRouter) RemoveRoute(r Route) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.have[r.Prefix]; !ok {
		return fmt.Errorf("route %v removed, not there", r.Prefix)
	}
	delete(f.have, r.Prefix)
	f.log = append(f.log, fmt.Sprintf("remove %v", r.Prefix))
	return nil
}

func (f *fakeRouter) changes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.log)
}

// roadWarriorYAML: A (127.0.0.1) asks B (127.0.0.2) for a virtual IP
// and routes what B's child offers: 10.2.0.0/24 and, as a full tunnel,
// 0.0.0.0/0 when B offers everything.
const roadWarriorYAML = `interfaces:
  - {name: ipsec1, if_id: 1%s}
%s
connections:
  - name: peer
    local_addrs: ["%s"]
    remote_addrs: ["%s"]
    proposals: [aes128gcm16-prfsha256-x25519]
    local: {auth: psk, id: %s}
    remote: {auth: psk, id: %s}
%s
    children:
      - {name: net, if_id: 1, local_ts: [%s], remote_ts: [%s], esp_proposals: [aes128gcm16], start_action: %s}
secrets:
  - {ids: [a.test, b.test], secret: "0x0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20"}
`

// roadWarriorPair starts B, a gateway with a pool of 10.3.0.7 that
// offers offer, and A, its road warrior asking for ask into a table of
// its own; the child comes up. It returns A, B and their routers.
func roadWarriorPair(t *testing.T, offer, ask string) (a, b *endpoint, ra, rb *fakeRouter) {
	t.Helper()
	n := newTestNet()
	gwCfg, err := config.Parse("b.yaml", []byte(fmt.Sprintf(roadWarriorYAML, ", routes: [10.3.0.7/32]", "pools:\n  - {name: rw, addrs: 10.3.0.7/32}",
		"127.0.0.2", "127.0.0.1", "b.test", "a.test", "    pools: [rw]", offer, "dynamic", "none")))
	if err != nil {
		t.Fatal(err)
	}
	gwCfg.IKE.Port = 0
	set, err := pool.NewSet(pool.New("rw", gwCfg.Pool("rw").Addrs))
	if err != nil {
		t.Fatal(err)
	}
	rb = &fakeRouter{have: map[netip.Prefix]Route{}}
	b = startDaemon(t, n, Config{IKE: &gwCfg.IKEConfig, RawESP: true, Pools: set, Router: rb,
		Listen: []netip.Addr{netip.MustParseAddr("127.0.0.2")}}, 0x2000)
	rwCfg, err := config.Parse("a.yaml", []byte(fmt.Sprintf(roadWarriorYAML, ", table: 220", "", "127.0.0.1", "127.0.0.2", "a.test", "b.test",
		"    vips: [0.0.0.0]", "dynamic", ask, "start")))
	if err != nil {
		t.Fatal(err)
	}
	rwCfg.IKE.Port = 0
	ra = &fakeRouter{have: map[netip.Prefix]Route{}}
	a = startDaemon(t, n, Config{IKE: &rwCfg.IKEConfig, RawESP: true, PeerPort: b.m.Port(), Router: ra,
		Listen: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}, 0x1000)
	n.waitFor(t, "the child", func() bool {
		return matched(a.node, b.node, 1) && established(a) && established(b) && len(ra.changes()) > 0
	})
	return a, b, ra, rb
}

// TestRoadWarriorRoutes: a road warrior's routes follow its child's
// negotiated remote traffic selectors, with the virtual IP as source and
// the gateway named; a child rekey by either side and an IKE rekey keep
// them without a gap (nothing removed, nothing added twice); a terminate
// takes them out. A gateway (no vips) routes nothing.
func TestRoadWarriorRoutes(t *testing.T) {
	for _, tt := range []struct {
		name, offer, ask, want string
	}{
		{"split tunnel", "10.2.0.0/24", "10.2.0.0/24, 10.9.0.0/16", "add 10.2.0.0/24 if_id 1 src 10.3.0.7 gateway 127.0.0.2 child net"},
		{"full tunnel", "0.0.0.0/0", "0.0.0.0/0", "add 0.0.0.0/0 if_id 1 src 10.3.0.7 gateway 127.0.0.2 child net"},
		{"two prefixes", "10.2.0.0/24, 10.5.0.0/16", "0.0.0.0/0", "add 10.2.0.0/24 if_id 1 src 10.3.0.7 gateway 127.0.0.2 child net|add 10.5.0.0/16 if_id 1 src 10.3.0.7 gateway 127.0.0.2 child net"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, b, router, gwRouter := roadWarriorPair(t, tt.offer, tt.ask)
			want := strings.Split(tt.want, "|")
			if got := router.changes(); !slices.Equal(got, want) {
				t.Errorf("routes: got %q, want %q", got, want)
			}
			for _, step := range []struct {
				e *endpoint
				t Target
			}{{b, Target{Child: "net"}}, {a, Target{Child: "net"}}, {a, Target{IKE: "peer"}}, {b, Target{IKE: "peer"}}} {
				rekeyAndWait(t, a, b, step.e, step.t)
				if got := router.changes(); !slices.Equal(got, want) {
					t.Errorf("routes after a rekey (%+v): got %q, want %q", step.t, got, want)
				}
			}
			if err := a.m.Terminate(Target{IKE: "peer"}); err != nil {
				t.Fatal(err)
			}
			a.net.waitFor(t, "the routes to go", func() bool { return len(router.changes()) == 2*len(want) })
			for i, w := range want {
				if got, gone := router.changes()[len(want)+i], "remove "+strings.Fields(w)[1]; got != gone {
					t.Errorf("after the terminate: got %q, want %q", got, gone)
				}
			}
			if got := gwRouter.changes(); len(got) != 0 {
				t.Errorf("the gateway routed %q, want nothing", got)
			}
		})
	}
}

// TestRoadWarriorRoutesStop: the daemon's stop removes the routes.
func TestRoadWarriorRoutesStop(t *testing.T) {
	a, _, router, _ := roadWarriorPair(t, "0.0.0.0/0", "0.0.0.0/0")
	a.stop()
	if got := router.changes(); len(got) != 2 || got[1] != "remove 0.0.0.0/0" {
		t.Errorf("routes after the stop: %q, want the add and remove 0.0.0.0/0", got)
	}
}
