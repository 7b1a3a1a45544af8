package tun

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ipsecd/ipsecd/tun/netnstest"
)

// TestScaleBringUp measures what `ipsecd run` does at start-up with many
// interfaces: Open, one address and one route each, in a namespace of its
// own. It is a measuring tool, not part of the ordinary suite: it runs only
// with IPSECD_TUN_SCALE=N (1,000 or 10,000 interfaces). With
// IPSECD_TUN_SCALE_KEEP=1 the devices are not closed (the namespace and the
// process exit remove them), so that `strace -f -c` of the test binary
// counts the bring-up alone. docs/design.md ("Netlink") has the figures.
func TestScaleBringUp(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("IPSECD_TUN_SCALE"))
	if n <= 0 {
		t.Skip("set IPSECD_TUN_SCALE=N to bring up N interfaces")
	}
	// Each device holds its queue's descriptor; before the netlink
	// sockets were shared, it held a socket too, and 10,000 devices hit
	// a hard limit of 20,000. Raise the limit where we may, for the
	// comparison.
	lim := unix.Rlimit{Cur: uint64(4*n + 1024), Max: uint64(4*n + 1024)}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Logf("raise RLIMIT_NOFILE: %v", err)
	}
	keep := os.Getenv("IPSECD_TUN_SCALE_KEEP") == "1"
	ns := netnstest.New(t, "tunscale")
	devs := make([]*Device, 0, n)
	start := time.Now()
	var splits []time.Duration // time of each 1,000 interfaces
	last := start
	err := ns.Do(func() error {
		for i := range n {
			if i > 0 && i%1000 == 0 {
				splits = append(splits, time.Since(last))
				last = time.Now()
			}
			d, err := Open(fmt.Sprintf("ipsec%d", i), testMTU, 1)
			if err != nil {
				return err
			}
			devs = append(devs, d)
			a := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 1}), 24)
			r := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 128 + byte(i>>8), byte(i), 0}), 24)
			if err := d.AddAddress(a); err != nil {
				return err
			}
			if err := d.AddRoute(r); err != nil {
				return err
			}
		}
		return nil
	})
	took := time.Since(start)
	if !keep {
		t.Cleanup(func() { closeAll(t, devs) })
	}
	if err != nil {
		t.Fatalf("after %d devices: %v", len(devs), err)
	}
	splits = append(splits, time.Since(last))
	t.Logf("%d interfaces, an address and a route each: %v (%v each); each 1,000: %v", n, took, took/time.Duration(n), splits)
}

// closeAll closes devs 32 at a time: each removal waits for RCU grace
// periods, which overlap when removals run concurrently.
func closeAll(t testing.TB, devs []*Device) {
	var wg sync.WaitGroup
	ch := make(chan *Device)
	for range 32 {
		wg.Go(func() {
			for d := range ch {
				if err := d.Close(); err != nil {
					t.Errorf("Close %s: %v", d.Name(), err)
				}
			}
		})
	}
	for _, d := range devs {
		ch <- d
	}
	close(ch)
	wg.Wait()
}

// TestDescriptorsPerDevice checks that a Device costs one descriptor per
// queue and shares the netlink sockets of its namespace: with a socket
// each, 10,000 interfaces need 20,000 descriptors, a common hard limit.
// Closing the last Device of a namespace closes the shared sockets.
func TestDescriptorsPerDevice(t *testing.T) {
	const n = 3 * handlesPerNS
	ns := netnstest.New(t, "tunfd")
	before := openFDs(t)
	devs := make([]*Device, 0, n)
	t.Cleanup(func() { closeAll(t, devs) })
	var g *Guards
	err := ns.Do(func() (err error) {
		if g, err = OpenGuards(); err != nil {
			return err
		}
		for i := range n {
			d, err := Open(fmt.Sprintf("ipsec%d", i), testMTU, 1)
			if err != nil {
				return err
			}
			devs = append(devs, d)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := openFDs(t)-before, n+handlesPerNS; got > want {
		t.Errorf("%d devices and a Guards hold %d descriptors, want at most %d (a queue each and %d shared netlink sockets)", n, got, want, handlesPerNS)
	}
	g.Close()
	closeAll(t, devs)
	devs = nil
	if got := openFDs(t) - before; got != 0 {
		t.Errorf("%d descriptors left open after Close", got)
	}
	namespaces.mu.Lock()
	left := len(namespaces.byID)
	namespaces.mu.Unlock()
	if left != 0 {
		t.Errorf("%d namespaces left in the registry after the last Close, want 0", left)
	}
}

func openFDs(t testing.TB) int {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}
