package node

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"

	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/xfrmif"
	"github.com/ipsecd/ipsecd/xfrmif/xfrmiftest"
)

// TestEvents: every path that changes the SAD reports its changes, once
// each and in order: a reload (Sync) adds, updates and deletes with the
// reason, IKE's InstallChild and RemoveStates, a flush.
func TestEvents(t *testing.T) {
	var mu sync.Mutex
	var got []string
	n, err := New(Config{EphemeralKeys: true, Events: func(ev Event) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case ev.SA != nil:
			got = append(got, fmt.Sprintf("%s 0x%x %s", ev.Kind, ev.SA.SPI(), ev.Reason))
		case ev.Kind == EventPolicyAdded || ev.Kind == EventPolicyDeleted:
			got = append(got, fmt.Sprintf("%s %s", ev.Kind, ev.Policy.Dir))
		default:
			got = append(got, fmt.Sprintf("%s %s", ev.Kind, ev.Interface))
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	take := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := got
		got = nil
		return out
	}
	check := func(step string, want ...string) {
		t.Helper()
		if g := take(); !slices.Equal(g, want) {
			t.Errorf("%s: events %q, want %q", step, g, want)
		}
	}
	n.Registry().Create = idleCreate
	if _, err := n.SyncInterfaces(ifConfigs("ipsec1")); err != nil {
		t.Fatal(err)
	}
	check("interfaces", "interface_up ipsec1")

	syncFile(t, n, []sa.Config{state(sa.DirOut, 0x1001, 1)}, []sa.Policy{{Dir: sa.DirOut, IfID: 1, Action: sa.ActionAllow}})
	check("first load", "state_added 0x1001 ", "policy_added out")
	longer := state(sa.DirOut, 0x1001, 1)
	longer.Lifetime.HardPackets = 100
	syncFile(t, n, []sa.Config{longer, state(sa.DirOut, 0x1002, 2)}, nil)
	check("reload", "state_updated 0x1001 ", "state_added 0x1002 ", "policy_deleted out")
	syncFile(t, n, []sa.Config{longer}, nil)
	check("reload without 0x1002", "state_deleted 0x1002 reload")

	if err := n.InstallChild(OwnerIKE, state(sa.DirIn, 0x2001, 3), state(sa.DirOut, 0x2002, 4)); err != nil {
		t.Fatal(err)
	}
	check("IKE child", "state_added 0x2001 ", "state_added 0x2002 ")
	if err := n.InstallChild(OwnerIKE, state(sa.DirIn, 0x3001, 5), state(sa.DirOut, 0x3002, 6),
		StateID{sa.DirOut, 0x2002, netip.Addr{}}, StateID{sa.DirIn, 0x2001, netip.Addr{}}); err != nil {
		t.Fatal(err)
	}
	check("IKE rekey", "state_deleted 0x2001 rekeyed", "state_deleted 0x2002 rekeyed", "state_added 0x3001 ", "state_added 0x3002 ")
	if err := n.RemoveStates(OwnerIKE, StateID{sa.DirIn, 0x3001, state(sa.DirIn, 0x3001, 5).Dst}); err != nil {
		t.Fatal(err)
	}
	check("IKE child down", "state_deleted 0x3001 child down")
	if _, err := n.FlushStates(); err != nil {
		t.Fatal(err)
	}
	check("flush", "state_deleted 0x1001 flushed", "state_deleted 0x3002 flushed")
	if _, err := n.SyncInterfaces(nil); err != nil {
		t.Fatal(err)
	}
	check("interfaces removed", "interface_down ipsec1")
}

// idleCreate makes interfaces over idle links, for SyncInterfaces
// without TUN devices.
func idleCreate(c xfrmif.Config) (*xfrmif.Interface, error) {
	return xfrmif.NewInterface(c, xfrmiftest.NewIdleLink(max(c.Queues, 1)))
}

func ifConfigs(names ...string) []xfrmif.Config {
	out := make([]xfrmif.Config, len(names))
	for i, name := range names {
		out[i] = xfrmif.Config{Name: name, IfID: uint32(i + 1)}
	}
	return out
}
