package tun

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/tun/netnstest"
)

// TestCloseAll: a new device is set up in one message (MTU, queue length,
// no IPv6 link-local address, the namespace's link group); closing some
// of the devices removes just those, one by one; closing all the rest
// removes them as a group, and leaves a link of someone else's alone.
func TestCloseAll(t *testing.T) {
	ns := netnstest.New(t, "tunclose")
	ns.IP(t, "tuntap", "add", "other0", "mode", "tun")
	before := openFDs(t)
	devs := make([]*Device, 6)
	t.Cleanup(func() { closeAll(t, devs) })
	err := ns.Do(func() (err error) {
		for i := range devs {
			if devs[i], err = OpenOptions(fmt.Sprintf("ipsec%d", i), testMTU, 1, Options{TxQueueLen: 700}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out := ns.IP(t, "-d", "link", "show", "ipsec0")
	for _, want := range []string{fmt.Sprintf("mtu %d ", testMTU), "qlen 700", "addrgenmode none", ",UP"} {
		if !strings.Contains(out, want) {
			t.Errorf("new device: no %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "group default") {
		t.Errorf("new device in the default link group:\n%s", out)
	}
	if out := ns.IP(t, "-6", "addr", "show", "dev", "ipsec0"); strings.Contains(out, "fe80") {
		t.Errorf("new device has a link-local address:\n%s", out)
	}

	groups := groupRemovals.Load()
	for i, err := range CloseAll(devs[:2]) {
		if err != nil {
			t.Errorf("CloseAll, a part: device %d: %v", i, err)
		}
	}
	if got := groupRemovals.Load() - groups; got != 0 {
		t.Errorf("CloseAll of a part removed %d groups, want 0: the others would go too", got)
	}
	links := ns.IP(t, "-o", "link", "show")
	for i, d := range devs {
		if gone := !strings.Contains(links, d.Name()+":"); gone != (i < 2) {
			t.Errorf("after closing ipsec0 and ipsec1: %s gone %v", d.Name(), gone)
		}
	}
	groups = groupRemovals.Load()
	for i, err := range CloseAll(devs[2:]) {
		if err != nil {
			t.Errorf("CloseAll, the rest: device %d: %v", i, err)
		}
	}
	links = ns.IP(t, "-o", "link", "show")
	if strings.Contains(links, "ipsec") || !strings.Contains(links, "other0") {
		t.Errorf("after CloseAll of all, want only lo and other0:\n%s", links)
	}
	if got := groupRemovals.Load() - groups; got != 1 {
		t.Errorf("CloseAll of all removed %d groups, want 1", got)
	}
	if got := openFDs(t) - before; got != 0 {
		t.Errorf("%d descriptors left open after CloseAll", got)
	}
	if err := devs[0].Close(); err != nil {
		t.Errorf("Close after CloseAll: %v", err)
	}
}
