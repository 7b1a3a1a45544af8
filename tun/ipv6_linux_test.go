package tun

import (
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/tun/netnstest"
)

// readInNS reads file from a thread in ns: /proc/sys/net shows the
// namespace of the thread that opens it.
func readInNS(t *testing.T, ns *netnstest.NS, file string) string {
	t.Helper()
	var b []byte
	if err := ns.Do(func() (err error) { b, err = os.ReadFile(file); return err }); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestNoIPv6 opens an interface IPv4-only (a name with a dot and a dash,
// in a namespace the test entered) beside one with IPv6: the first has
// IPv6 disabled and no multicast route, so it adds nothing to the IPv6
// routes the kernel walks when links come up. EnableIPv6, called from a
// thread outside the namespace, turns IPv6 on again, and an IPv6 address
// and route then work.
func TestNoIPv6(t *testing.T) {
	if _, err := os.Stat(ipv6Conf); err != nil {
		t.Skip("kernel without IPv6")
	}
	ns := netnstest.New(t, "tunv6")
	const v4, dual = "v4.only-1", "dual0"
	var d4, d6 *Device
	err := ns.Do(func() (err error) {
		if d4, err = OpenOptions(v4, testMTU, 1, Options{NoIPv6: true}); err != nil {
			return err
		}
		d6, err = Open(dual, testMTU, 1)
		return err
	})
	for _, d := range []*Device{d4, d6} {
		if d != nil {
			t.Cleanup(func() { d.Close() })
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := readInNS(t, ns, ipv6Conf+v4+"/disable_ipv6"); got != "1" {
		t.Errorf("%s disable_ipv6 = %s, want 1", v4, got)
	}
	if got := readInNS(t, ns, ipv6Conf+dual+"/disable_ipv6"); got != "0" {
		t.Errorf("%s disable_ipv6 = %s, want 0", dual, got)
	}
	if out := ns.IP(t, "-6", "route", "show", "table", "all", "dev", v4); strings.Contains(out, "ff00::/8") {
		t.Errorf("%s has an IPv6 multicast route:\n%s", v4, out)
	}
	// The check above can fail: a device with IPv6 has the route.
	if out := ns.IP(t, "-6", "route", "show", "table", "all", "dev", dual); !strings.Contains(out, "ff00::/8") {
		t.Errorf("%s has no IPv6 multicast route:\n%s", dual, out)
	}
	a := netip.MustParsePrefix("2001:db8:1::1/64")
	if err := d4.AddAddress(a); err == nil {
		t.Errorf("IPv6 address added with IPv6 disabled")
	}

	// From the test's goroutine, whose thread is not in the namespace.
	if err := d4.EnableIPv6(); err != nil {
		t.Fatal(err)
	}
	if got := readInNS(t, ns, ipv6Conf+v4+"/disable_ipv6"); got != "0" {
		t.Errorf("%s disable_ipv6 = %s after EnableIPv6, want 0", v4, got)
	}
	if err := d4.AddAddress(a); err != nil {
		t.Fatal(err)
	}
	if err := d4.AddRoute(netip.MustParsePrefix("2001:db8:2::/64")); err != nil {
		t.Fatal(err)
	}
	if out := ns.IP(t, "-6", "route", "get", "2001:db8:1::1"); !strings.HasPrefix(out, "local ") {
		t.Errorf("2001:db8:1::1 not local after EnableIPv6: %q", out)
	}
	if out := ns.IP(t, "-6", "route", "get", "2001:db8:2::9"); !strings.Contains(out, "dev "+v4) {
		t.Errorf("2001:db8:2::9 not routed into %s: %q", v4, out)
	}
	// Once on, a second call changes nothing; a closed device answers.
	if err := d4.EnableIPv6(); err != nil {
		t.Error(err)
	}
	d4.Close()
	d4.ipv6Off = true
	if err := d4.EnableIPv6(); err == nil {
		t.Error("EnableIPv6 of a closed device: no error")
	}
}
