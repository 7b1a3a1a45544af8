package xfrmif

import (
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/tun/netnstest"
)

// TestSyncIPv4OnlyThenIPv6 brings up an IPv4-only interface and one with
// IPv6 through Registry.Sync, as the daemon's start does: the first has
// IPv6 disabled and no multicast route (which keeps the start-up of many
// such interfaces from growing quadratically), the second works as
// before, and so does a third with neither addresses nor routes (its
// routes, of either family, come by hand). A reload then gives the first an IPv6 address and route, which
// must work: IPv6 is turned on before they are added.
func TestSyncIPv4OnlyThenIPv6(t *testing.T) {
	const conf = "/proc/sys/net/ipv6/conf/"
	if _, err := os.Stat(conf); err != nil {
		t.Skip("kernel without IPv6")
	}
	ns := netnstest.New(t, "xfrmif")
	var r Registry
	t.Cleanup(func() { r.Close() })
	cfgs := []Config{
		{Name: "ipsec1", IfID: 1, MTU: 1400, Addresses: prefixes("192.0.2.1/24"), Routes: prefixes("198.51.100.0/24")},
		{Name: "ipsec2", IfID: 2, MTU: 1400, Addresses: prefixes("192.0.3.1/24", "2001:db8:3::1/64"), Routes: prefixes("2001:db8:4::/64")},
		{Name: "ipsec3", IfID: 3, MTU: 1400},
	}
	sysctl := func(name string) string {
		var b []byte
		if err := ns.Do(func() (err error) { b, err = os.ReadFile(conf + name + "/disable_ipv6"); return err }); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	// deliverable sends a UDP datagram to addr inside the namespace and
	// reports whether it arrived.
	deliverable := func(addr string) error {
		return ns.Do(func() error {
			l, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.ParseIP(addr)})
			if err != nil {
				return err
			}
			defer l.Close()
			c, err := net.DialUDP("udp6", nil, l.LocalAddr().(*net.UDPAddr))
			if err != nil {
				return err
			}
			defer c.Close()
			if _, err := c.Write([]byte("v6")); err != nil {
				return err
			}
			l.SetReadDeadline(time.Now().Add(2 * time.Second))
			_, err = l.Read(make([]byte, 16))
			return err
		})
	}
	if err := ns.Do(func() error { _, err := r.Sync(cfgs); return err }); err != nil {
		t.Fatal(err)
	}
	if got := sysctl("ipsec1"); got != "1" {
		t.Errorf("IPv4-only ipsec1: disable_ipv6 = %s, want 1", got)
	}
	if out := ns.IP(t, "-6", "route", "show", "table", "all", "dev", "ipsec1"); out != "" {
		t.Errorf("IPv4-only ipsec1 has IPv6 routes:\n%s", out)
	}
	if got := sysctl("ipsec2"); got != "0" {
		t.Errorf("ipsec2 with IPv6: disable_ipv6 = %s, want 0", got)
	}
	if got := sysctl("ipsec3"); got != "0" {
		t.Errorf("ipsec3 without addresses or routes: disable_ipv6 = %s, want 0", got)
	}
	if err := deliverable("2001:db8:3::1"); err != nil {
		t.Errorf("ipsec2's IPv6 address: %v", err)
	}
	if out := ns.IP(t, "-6", "route", "show", "dev", "ipsec2"); !strings.Contains(out, "2001:db8:4::/64") {
		t.Errorf("ipsec2's IPv6 route missing:\n%s", out)
	}

	cfgs[0].Addresses = prefixes("192.0.2.1/24", "2001:db8:1::1/64")
	cfgs[0].Routes = prefixes("198.51.100.0/24", "2001:db8:2::/64")
	if err := ns.Do(func() error { _, err := r.Sync(cfgs); return err }); err != nil {
		t.Fatalf("reload adding IPv6 to ipsec1: %v", err)
	}
	if got := sysctl("ipsec1"); got != "0" {
		t.Errorf("ipsec1 after the reload: disable_ipv6 = %s, want 0", got)
	}
	if err := deliverable("2001:db8:1::1"); err != nil {
		t.Errorf("ipsec1's new IPv6 address: %v", err)
	}
	if out := ns.IP(t, "-6", "route", "show", "dev", "ipsec1"); !strings.Contains(out, "2001:db8:2::/64") {
		t.Errorf("ipsec1's new IPv6 route missing:\n%s", out)
	}
}
