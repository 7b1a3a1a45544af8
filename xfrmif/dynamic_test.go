package xfrmif

import (
	"fmt"
	"net/netip"
	"testing"
)

// TestDynamicAddress: an address IKE got goes on the link beside the
// config's, a Reconfigure leaves it there, one the config holds is not
// added (nor removed) again, and RemoveDynamicAddress takes it off.
func TestDynamicAddress(t *testing.T) {
	l := newFakeLink(1)
	static := netip.MustParsePrefix("10.4.0.1/24")
	vip := netip.MustParsePrefix("10.3.0.7/32")
	cfg := Config{Name: "ipsec1", IfID: 1, Addresses: []netip.Prefix{static}}
	ifc, err := NewInterface(cfg, l)
	if err != nil {
		t.Fatal(err)
	}
	addrs := func() string { l.mu.Lock(); defer l.mu.Unlock(); return fmt.Sprint(l.addrs) }
	if added, err := ifc.AddDynamicAddress(vip); !added || err != nil {
		t.Fatalf("AddDynamicAddress = %v, %v", added, err)
	}
	if added, _ := ifc.AddDynamicAddress(static); added {
		t.Error("an address of the config was added again")
	}
	cfg.MTU = 1300
	if err := ifc.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	if got := addrs(); got != "[10.4.0.1/24 10.3.0.7/32]" {
		t.Errorf("after a reconfigure: %s, want the virtual IP still beside the config's", got)
	}
	if err := ifc.RemoveDynamicAddress(static); err != nil || addrs() != "[10.4.0.1/24 10.3.0.7/32]" {
		t.Errorf("removing the config's address as a dynamic one: %v, %s", err, addrs())
	}
	if err := ifc.RemoveDynamicAddress(vip); err != nil || addrs() != "[10.4.0.1/24]" {
		t.Errorf("RemoveDynamicAddress: %v, %s", err, addrs())
	}
}

// TestDynamicRoute: a route IKE negotiated goes into the link beside the
// config's, a Reconfigure leaves it, one the config holds is neither
// added nor removed as a dynamic one, and RemoveDynamicRoute takes it.
func TestDynamicRoute(t *testing.T) {
	l := newFakeLink(1)
	static := netip.MustParsePrefix("10.4.0.0/24")
	ts := netip.MustParsePrefix("10.9.0.0/16")
	cfg := Config{Name: "ipsec1", IfID: 1, Routes: []netip.Prefix{static}}
	ifc, err := NewInterface(cfg, l)
	if err != nil {
		t.Fatal(err)
	}
	routes := func() string { l.mu.Lock(); defer l.mu.Unlock(); return fmt.Sprint(l.routes) }
	if added, err := ifc.AddDynamicRoute(ts, netip.Addr{}); !added || err != nil {
		t.Fatalf("AddDynamicRoute = %v, %v", added, err)
	}
	if added, _ := ifc.AddDynamicRoute(static, netip.Addr{}); added {
		t.Error("a route of the config was added again")
	}
	cfg.MTU = 1300
	if err := ifc.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	if got := routes(); got != "[10.4.0.0/24 10.9.0.0/16]" {
		t.Errorf("after a reconfigure: %s, want the negotiated route still beside the config's", got)
	}
	if err := ifc.RemoveDynamicRoute(static); err != nil || routes() != "[10.4.0.0/24 10.9.0.0/16]" {
		t.Errorf("removing the config's route as a dynamic one: %v, %s", err, routes())
	}
	if err := ifc.RemoveDynamicRoute(ts); err != nil || routes() != "[10.4.0.0/24]" {
		t.Errorf("RemoveDynamicRoute: %v, %s", err, routes())
	}
}
