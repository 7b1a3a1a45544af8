package tun

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ipsecd/ipsecd/tun/netnstest"
)

// TestRulesAndThrows adds a road warrior's rules (with and without a
// mark to skip) and throw routes, and checks that Rules and Throws find
// exactly them, not look-alikes of another protocol, that ip prints
// them as String says, and that Remove deletes them once.
func TestRulesAndThrows(t *testing.T) {
	ns := netnstest.New(t, "rules")
	var g *Guards
	if err := ns.Do(func() (err error) { g, err = OpenGuards(); return err }); err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ns.IP(t, "rule", "add", "priority", "221", "lookup", "221") // the operator's, no protocol
	ns.IP(t, "route", "add", "throw", "192.0.2.9", "table", "220")
	rules := []Rule{
		{Priority: 220, Table: 220, NotMark: 0x100},
		{Priority: 300, Table: 1000},
		{IPv6: true, Priority: 220, Table: 220, NotMark: 0x100},
	} // in the order Rules lists them: by family, then priority
	throws := []Throw{
		{Table: 220, Prefix: netip.MustParsePrefix("192.0.2.1/32")},
		{Table: 1000, Prefix: netip.MustParsePrefix("2001:db8:ff::1/128")},
	}
	for _, r := range rules {
		if err := g.AddRule(r); err != nil {
			t.Fatal(err)
		}
		if err := g.AddRule(r); err != nil {
			t.Errorf("adding %v twice: %v, want nil", r, err)
		}
	}
	for _, th := range throws {
		if err := g.AddThrow(th); err != nil {
			t.Fatal(err)
		}
		if err := g.AddThrow(th); err != nil {
			t.Errorf("adding %v twice: %v, want nil", th, err)
		}
	}
	gotRules, err := g.Rules()
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(gotRules) != fmt.Sprint(rules) {
		t.Errorf("Rules: got %v, want %v", gotRules, rules)
	}
	gotThrows, err := g.Throws()
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(gotThrows) != fmt.Sprint(throws) {
		t.Errorf("Throws: got %v, want %v", gotThrows, throws)
	}
	if out := ns.IP(t, "rule", "show", "priority", "220"); !strings.Contains(out, "220:\tnot from all fwmark 0x100 lookup 220 proto 90") {
		t.Errorf("ip rule shows\n%s\nwant: not from all fwmark 0x100 lookup 220 proto 90", out)
	}
	for _, r := range rules {
		if err := g.RemoveRule(r); err != nil {
			t.Fatal(err)
		}
		if err := g.RemoveRule(r); err != nil {
			t.Errorf("removing %v twice: %v, want nil", r, err)
		}
	}
	for _, th := range throws {
		if err := g.RemoveThrow(th); err != nil {
			t.Fatal(err)
		}
	}
	if rs, _ := g.Rules(); len(rs) != 0 {
		t.Errorf("Rules after Remove: %v", rs)
	}
	if ths, _ := g.Throws(); len(ths) != 0 {
		t.Errorf("Throws after Remove: %v", ths)
	}
	if out := ns.IP(t, "rule", "show", "priority", "221"); !strings.Contains(out, "lookup 221") {
		t.Errorf("the operator's rule went:\n%s", out)
	}
	if out := ns.IP(t, "route", "show", "table", "220"); !strings.Contains(out, "throw 192.0.2.9") {
		t.Errorf("the operator's throw route went:\n%s", out)
	}
}

// TestAddRouteFrom: a route with a source address, which never replaces
// a route of its prefix that is there.
func TestAddRouteFrom(t *testing.T) {
	ns := netnstest.New(t, "routefrom")
	var dev *Device
	if err := ns.Do(func() (err error) { dev, err = Open("ipsec1", 1400, 1); return err }); err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	vip := netip.MustParseAddr("10.3.0.7")
	if err := dev.AddAddress(netip.PrefixFrom(vip, 32)); err != nil {
		t.Fatal(err)
	}
	if err := dev.AddRouteFrom(netip.MustParsePrefix("203.0.113.0/24"), vip); err != nil {
		t.Fatal(err)
	}
	if out := ns.IP(t, "route", "show", "203.0.113.0/24"); !strings.Contains(out, "dev ipsec1") || !strings.Contains(out, "src 10.3.0.7") {
		t.Errorf("ip route shows %q, want dev ipsec1 src 10.3.0.7", out)
	}
	if err := dev.AddRouteFrom(netip.MustParsePrefix("203.0.113.0/24"), vip); !errors.Is(err, unix.EEXIST) {
		t.Errorf("adding it again: %v, want EEXIST", err)
	}
	if err := dev.RemoveRoute(netip.MustParsePrefix("203.0.113.0/24")); err != nil {
		t.Fatal(err)
	}
	if out := ns.IP(t, "route", "show", "203.0.113.0/24"); out != "" {
		t.Errorf("after RemoveRoute: %q", out)
	}
}
