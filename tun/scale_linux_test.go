package tun

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
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
	if got, want := openFDs(t)-before, n+handlesPerNS+1; got > want {
		t.Errorf("%d devices and a Guards hold %d descriptors, want at most %d (a queue each, %d shared netlink sockets and one for group removals)", n, got, want, handlesPerNS)
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

// TestIdleDeviceMemory checks that a device that carries no traffic has
// no offload machinery: wireguard/tun's read buffer and GRO tables took
// about 1.6 MiB of heap a queue (800 KiB of RSS), 1,000 interfaces 155 MiB.
// The first packet written makes the queue active.
func TestIdleDeviceMemory(t *testing.T) {
	const n = 20
	ns := netnstest.New(t, "tunidle")
	devs := make([]*Device, 0, n)
	t.Cleanup(func() { closeAll(t, devs) })
	before := heapInUse()
	err := ns.Do(func() error {
		for i := range n {
			d, err := Open(fmt.Sprintf("ipsec%d", i), testMTU, 2)
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
	const maxPerDevice = 16 << 10
	if per := (heapInUse() - before) / n; per > maxPerDevice {
		t.Errorf("an idle device with 2 queues holds %d bytes of heap, want at most %d", per, maxPerDevice)
	}
	for _, d := range devs {
		if a := d.ActiveQueues(); a != 0 {
			t.Errorf("%s: %d active queues before any traffic, want 0", d.Name(), a)
		}
	}

	// A read blocked on an idle queue: a write to the same queue makes it
	// active under the read, which goes on reading; closing the device
	// releases it with os.ErrClosed, and its deletion activates nothing.
	q := devs[0].Queues()[1]
	readErr := make(chan error, 1)
	go func() {
		bufs := [][]byte{make([]byte, MinOffset+MaxPacketSize)}
		for {
			// Nothing routes into the device: no read returns a packet.
			if _, err := q.Read(bufs, make([]int, 1), MinOffset); err != nil {
				readErr <- err
				return
			}
		}
	}()
	pkt := append(make([]byte, MinOffset), udpPacket(netip.MustParseAddrPort("192.0.2.1:1"), netip.MustParseAddrPort("192.0.2.2:2"), []byte("x"))...)
	if _, err := q.Write([][]byte{pkt}, MinOffset); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if a := devs[0].ActiveQueues(); a != 1 {
		t.Errorf("after a write to queue 1: %d active queues, want 1", a)
	}
	select {
	case err := <-readErr:
		t.Fatalf("Read returned %v when its queue became active", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := devs[0].Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-readErr:
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("Read after Close: %v, want os.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Read still blocked 5 s after Close")
	}
	if err := devs[1].Close(); err != nil {
		t.Fatal(err)
	}
	if a := devs[1].ActiveQueues(); a != 0 {
		t.Errorf("closing an idle device made %d queues active", a)
	}
}

// TestIdleQueueDeadline checks that a read deadline releases a read
// blocked on an idle queue, and is kept when the queue becomes active.
func TestIdleQueueDeadline(t *testing.T) {
	ns := netnstest.New(t, "tundl")
	d := openConfigured(t, ns, "ipsec1", 1)
	bufs, sizes := [][]byte{make([]byte, MinOffset+MaxPacketSize)}, make([]int, 1)
	d.SetReadDeadline(0, time.Now().Add(50*time.Millisecond))
	if _, err := d.Queues()[0].Read(bufs, sizes, MinOffset); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("idle Read past its deadline: %v, want os.ErrDeadlineExceeded", err)
	}
	if d.ActiveQueues() != 0 {
		t.Error("a deadline made the queue active")
	}
	pkt := append(make([]byte, MinOffset), udpPacket(netip.MustParseAddrPort("192.0.2.1:1"), netip.MustParseAddrPort("192.0.2.2:2"), []byte("x"))...)
	if _, err := d.Queues()[0].Write([][]byte{pkt}, MinOffset); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Queues()[0].Read(bufs, sizes, MinOffset); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("active Read past the deadline set while idle: %v, want os.ErrDeadlineExceeded", err)
	}
}

func heapInUse() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}

// TestActivateDeletedLink checks that a queue whose interface is gone
// fails to become active without closing a descriptor twice: wireguard/tun
// wraps the descriptor in an *os.File before it can fail, and closing the
// number as well let that file's finalizer close it again later, under
// whatever had the number then (a netlink socket: ENOTSOCK).
func TestActivateDeletedLink(t *testing.T) {
	ns := netnstest.New(t, "tundel")
	d := openConfigured(t, ns, "ipsec1", 1)
	ns.IP(t, "link", "del", "ipsec1")
	pkt := append(make([]byte, MinOffset), udpPacket(netip.MustParseAddrPort("192.0.2.1:1"), netip.MustParseAddrPort("192.0.2.2:2"), []byte("x"))...)
	if _, err := d.Queues()[0].Write([][]byte{pkt}, MinOffset); err == nil {
		t.Fatal("Write to a deleted interface succeeded")
	}
	// Whatever descriptor comes next must stay open through collections.
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	for range 5 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
		t.Errorf("a socket opened after the failed activation was closed under us: %v", err)
	}
}

// TestActiveQueueWriteAllocs checks that the lazy queue adds no
// allocation to a write once the queue is active: the data path writes
// every inbound batch through it.
func TestActiveQueueWriteAllocs(t *testing.T) {
	ns := netnstest.New(t, "tunalloc")
	d := openConfigured(t, ns, "ipsec1", 1)
	q := d.Queues()[0]
	pkt := append(make([]byte, MinOffset), udpPacket(netip.MustParseAddrPort("192.0.2.1:1"), netip.MustParseAddrPort("192.0.2.2:2"), []byte("x"))...)
	bufs := [][]byte{pkt}
	if _, err := q.Write(bufs, MinOffset); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { q.Write(bufs, MinOffset) }); n != 0 {
		t.Errorf("Write of an active queue: %v allocations, want 0", n)
	}
}
