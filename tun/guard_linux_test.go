package tun

import (
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/tun/netnstest"
)

// TestGuards adds guards in the main table and another one, in both
// families, and checks that List finds exactly them (not routes that share
// some of their marks), that the kernel refuses what they cover once the
// device route is gone, and that Remove deletes only them.
func TestGuards(t *testing.T) {
	ns := netnstest.New(t, "guard")
	var g *Guards
	var dev *Device
	if err := ns.Do(func() (err error) {
		if g, err = OpenGuards(); err != nil {
			return err
		}
		dev, err = Open("ipsec1", 1400, 1)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	defer dev.Close()
	// A default route, as every real host has: without the guards,
	// what ipsec1 routed would leave through it once ipsec1 is gone.
	ns.IP(t, "link", "add", "d0", "type", "veth", "peer", "name", "d1")
	ns.IP(t, "addr", "add", "192.0.2.1/24", "dev", "d0")
	ns.IP(t, "link", "set", "d0", "up")
	ns.IP(t, "route", "add", "default", "via", "192.0.2.2")
	// Look-alikes that are not guards: another protocol, another metric.
	ns.IP(t, "route", "add", "unreachable", "100.64.0.0/25", "metric", "4294967295")
	ns.IP(t, "route", "add", "unreachable", "100.64.0.128/25", "proto", "90")

	guards := []Guard{
		{Prefix: netip.MustParsePrefix("203.0.113.0/24")},
		{Prefix: netip.MustParsePrefix("2001:db8:b::/64")},
		{Table: 100, Prefix: netip.MustParsePrefix("198.51.100.2/32")},
		{Table: 1000, Prefix: netip.MustParsePrefix("2001:db8:ff::2/128")},
		{Table: 100, Prefix: netip.MustParsePrefix("0.0.0.0/0")},
	}
	for _, gd := range guards {
		if gd.Table == 0 {
			if err := dev.AddRoute(gd.Prefix); err != nil {
				t.Fatal(err)
			}
		}
		if err := g.Add(gd); err != nil {
			t.Fatal(err)
		}
		if err := g.Add(gd); err != nil {
			t.Errorf("adding %v twice: %v, want nil", gd, err)
		}
	}
	got, err := g.List()
	if err != nil {
		t.Fatal(err)
	}
	sortGuards(got)
	want := slices.Clone(guards)
	sortGuards(want)
	if !slices.Equal(got, want) {
		t.Errorf("List = %v, want %v", got, want)
	}

	// The device route wins while it is there; then the guard.
	if out := ns.IP(t, "route", "get", "203.0.113.1"); !strings.Contains(out, "dev ipsec1") {
		t.Errorf("route get 203.0.113.1 with the device up: %s, want dev ipsec1", out)
	}
	dev.Close()
	ns.IP(t, "-6", "route", "add", "default", "dev", "d0")
	for _, dst := range []string{"203.0.113.1", "2001:db8:b::1"} {
		if out, err := exec.Command("ip", "-n", ns.Name, "route", "get", dst).CombinedOutput(); err == nil || strings.Contains(string(out), "d0") {
			t.Errorf("route get %s with the device gone: %v %s, want unreachable", dst, err, out)
		}
	}

	for _, gd := range guards {
		if err := g.Remove(gd); err != nil {
			t.Error(err)
		}
		if err := g.Remove(gd); err != nil {
			t.Errorf("removing %v twice: %v, want nil", gd, err)
		}
	}
	if got, err := g.List(); err != nil || len(got) != 0 {
		t.Errorf("List after Remove = %v, %v; want none", got, err)
	}
	out := ns.IP(t, "route", "show", "table", "all")
	for _, s := range []string{"100.64.0.0/25", "100.64.0.128/25"} {
		if !strings.Contains(out, s) {
			t.Errorf("the look-alike %s is gone: %s", s, out)
		}
	}
}

func sortGuards(gs []Guard) {
	slices.SortFunc(gs, func(a, b Guard) int {
		if c := strings.Compare(a.Prefix.String(), b.Prefix.String()); c != 0 {
			return c
		}
		return int(a.Table) - int(b.Table)
	})
}

// TestGuardsListMany lists more guards than one netlink read holds, so
// that the dump comes in several parts.
func TestGuardsListMany(t *testing.T) {
	ns := netnstest.New(t, "guard")
	var g *Guards
	if err := ns.Do(func() (err error) { g, err = OpenGuards(); return err }); err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	const n = 3000 // about 60 bytes each: several 32 KiB reads
	for i := range n {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24)
		if err := g.Add(Guard{Prefix: p}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := g.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Errorf("List returned %d guards, want %d", len(got), n)
	}
}
