package vici_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/control"
	govici "github.com/strongswan/govici/vici"
)

// fakePools is a fakeIKE with address pools.
type fakePools struct {
	fakeIKE
	asked []bool
}

func (f *fakePools) PoolList(leases bool) ([]control.PoolInfo, error) {
	f.asked = append(f.asked, leases)
	rw := control.PoolInfo{Name: "rw", Addrs: "10.3.0.0/24", Size: 254, Online: 1, Offline: 1}
	rng := control.PoolInfo{Name: "lab", Addrs: "10.4.0.10-10.4.0.20", Size: 11}
	if leases {
		rw.Leases = []control.PoolLease{
			{Address: netip.MustParseAddr("10.3.0.1"), Identity: "alice@example.net", Status: "online"},
			{Address: netip.MustParseAddr("10.3.0.2"), Identity: "bob@example.net", Status: "offline"},
		}
		rng.Leases = []control.PoolLease{}
	}
	return []control.PoolInfo{rw, rng}, nil
}

func TestGetPools(t *testing.T) {
	f := &fakePools{}
	_, sess := serve(t, f, nil)
	resp, err := sess.Call(context.Background(), "get-pools", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(flat(resp, ""), " "),
		"rw.base=10.3.0.0 rw.size=254 rw.online=1 rw.offline=1 lab.base=10.4.0.10 lab.size=11 lab.online=0 lab.offline=0"; got != want {
		t.Errorf("get-pools:\n got %s\nwant %s", got, want)
	}
	resp, err = sess.Call(context.Background(), "get-pools", msg(t, "leases", "yes", "name", "rw"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(flat(resp, ""), " "),
		"rw.base=10.3.0.0 rw.size=254 rw.online=1 rw.offline=1 "+
			"rw.leases.0.address=10.3.0.1 rw.leases.0.identity=alice@example.net rw.leases.0.status=online "+
			"rw.leases.1.address=10.3.0.2 rw.leases.1.identity=bob@example.net rw.leases.1.status=offline"; got != want {
		t.Errorf("get-pools leases=yes name=rw:\n got %s\nwant %s", got, want)
	}
	if len(f.asked) != 2 || f.asked[0] || !f.asked[1] {
		t.Errorf("leases asked for %v, want [false true]", f.asked)
	}
	// Without pools (a Backend without them): an empty answer, as charon's.
	_, sess = serve(t, &fakeIKE{}, nil)
	if resp, err := sess.Call(context.Background(), "get-pools", nil); err != nil || len(resp.Keys()) != 0 {
		t.Errorf("get-pools without pools: %v, %v", resp, err)
	}
}

// fakePoolLoader records the pools load-pool hands the daemon.
type fakePoolLoader struct {
	fakePools
	items    []string
	unloaded []string
}

func (f *fakePoolLoader) LoadPool(name string, item []byte) error {
	f.items = append(f.items, name+" "+string(item))
	return nil
}

func (f *fakePoolLoader) UnloadPool(name string) error {
	f.unloaded = append(f.unloaded, name)
	return nil
}

// TestLoadPoolTranslates: a pool as swanctl --load-pools sends it
// becomes the config file's pool item (subnet is split_include, 25 the
// DNS domains); unload-pool names one; neither without a PoolLoader.
func TestLoadPoolTranslates(t *testing.T) {
	f := &fakePoolLoader{}
	_, sess := serve(t, f, nil)
	pool := govici.NewMessage()
	for _, kv := range []struct {
		k string
		v any
	}{{"addrs", "10.3.0.0/24"}, {"dns", []string{"10.3.0.53", "fd00::53"}}, {"subnet", []string{"10.9.0.0/16"}}, {"25", []string{"corp.example"}}} {
		if err := pool.Set(kv.k, kv.v); err != nil {
			t.Fatal(err)
		}
	}
	req := govici.NewMessage()
	if err := req.Set("rw", pool); err != nil {
		t.Fatal(err)
	}
	if resp, err := sess.Call(context.Background(), "load-pool", req); err != nil || resp.Get("success") != "yes" {
		t.Fatalf("load-pool: %v, %v", resp, err)
	}
	want := `rw {name: "rw", addrs: "10.3.0.0/24", dns: ["10.3.0.53", "fd00::53"], split_include: ["10.9.0.0/16"], dns_domains: ["corp.example"]}`
	if len(f.items) != 1 || f.items[0] != want {
		t.Errorf("items %q; want %q", f.items, want)
	}
	if resp, err := sess.Call(context.Background(), "unload-pool", msg(t, "name", "rw")); err != nil || resp.Get("success") != "yes" || len(f.unloaded) != 1 {
		t.Errorf("unload-pool: %v, %v, %v", resp, err, f.unloaded)
	}
	_, sess = serve(t, &fakePools{}, nil)
	resp, err := sess.Call(context.Background(), "load-pool", req)
	if err == nil || resp.Get("errmsg") != "load-pool: this daemon takes no address pools over vici" {
		t.Errorf("without a PoolLoader: %v, %v", resp, err)
	}
}
