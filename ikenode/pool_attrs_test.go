package ikenode

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/pool"
)

// TestPoolAttrsFollowReload: a connection's leases carry the DNS servers
// of the config IKE runs last, not of the one the connection was made
// with, so that a reload (or vici's load-pool) that changes only a
// pool's attributes reaches the connections it keeps.
func TestPoolAttrsFollowReload(t *testing.T) {
	r, err := pool.ParseRange("10.3.0.0/24")
	if err != nil {
		t.Fatal(err)
	}
	set, err := pool.NewSet(pool.New("rw", r))
	if err != nil {
		t.Fatal(err)
	}
	m := &Daemon{cfg: Config{Pools: set}}
	ic := func(dns string) *config.IKEConfig {
		return &config.IKEConfig{Pools: []config.Pool{{Name: "rw", Addrs: r, DNS: []netip.Addr{netip.MustParseAddr(dns)}}}}
	}
	m.storePoolAttrs(ic("10.3.0.53"))
	v := m.vipsFor(&config.Connection{Pools: []string{"rw"}}) // the connection a reload keeps
	peer := netip.MustParseAddrPort("192.0.2.9:500")
	l, err := v.Acquire("alice", netip.IPv4Unspecified(), peer)
	if err != nil || !slices.Equal(l.DNS, []netip.Addr{netip.MustParseAddr("10.3.0.53")}) {
		t.Fatalf("alice: %+v, %v", l, err)
	}
	m.storePoolAttrs(ic("10.3.0.54")) // the reload
	l, err = v.Acquire("bob", netip.IPv4Unspecified(), peer)
	if err != nil || !slices.Equal(l.DNS, []netip.Addr{netip.MustParseAddr("10.3.0.54")}) {
		t.Fatalf("bob after the reload: %+v, %v; want the new DNS server", l, err)
	}
}
