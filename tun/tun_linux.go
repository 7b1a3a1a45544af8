package tun

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	wgtun "golang.zx2c4.com/wireguard/tun"
)

const cloneDevicePath = "/dev/net/tun"

// Options are the less common choices of OpenOptions.
type Options struct {
	// Monitor wraps queue 0 as wireguard's CreateTUN does, with a netlink
	// listener for link events (drained and ignored: ipsecd does not use
	// them). It costs a socket subscribed to every link and address event
	// of the namespace and two goroutines per interface, so each event
	// wakes every monitored interface: with 200 interfaces, creating and
	// configuring them took 1.3 s monitored against 0.15 s without.
	Monitor bool
	// RouteTable is the routing table AddRoute and RemoveRoute use; 0
	// means the main table. Another table serves policy routing, as
	// transport mode needs (see examples/transport.yaml).
	RouteTable uint32
	// Down leaves the interface down, with its MTU set: SetLink(0, true)
	// brings it up. Each interface that comes up, and each MTU change,
	// makes the kernel walk every IPv6 route of the namespace
	// (rt6_sync_up, rt6_mtu_change); many interfaces come up fastest all
	// MTUs first, then all links up, then all addresses and routes, so
	// that the walks cover few routes (see xfrmif.Registry.Sync).
	Down bool
	// TxQueueLen, unless 0, is the length of the transmit queue, set
	// with the MTU before the link comes up. Changing it on a link that is up makes
	// the kernel deactivate the link's qdisc and wait for an RCU grace
	// period with the RTNL lock held (dev_deactivate), which holds up
	// every other netlink request of the host: with 1,000 interfaces,
	// the largest part of their start-up.
	TxQueueLen int
	// NoIPv6 disables IPv6 on the interface (disable_ipv6) while it is
	// still down, for an interface that will have no IPv6 address or
	// route: its link-up then adds no IPv6 multicast route, which
	// keeps the start-up of many IPv4-only interfaces from growing
	// quadratically (see ipv6_linux.go). EnableIPv6 turns it back on.
	NoIPv6 bool
}

// Device is one TUN network interface and its queues. Its methods are safe
// for concurrent use; Close removes the interface.
type Device struct {
	name   string
	index  int
	queues []Queue
	qs     []*queue    // the same queues, for deadlines and Close
	nl     *rtnl       // shared handles of the namespace the device was created in
	table  uint32      // routing table of AddRoute; 0 is main
	up     atomic.Bool // set up by SetLink
	// grouped: the link is in its namespace's group (counted in
	// nsHandles.grouped until closed).
	grouped bool
	// ipv6Mu guards: ipv6Off, IPv6 disabled by Options.NoIPv6.
	ipv6Mu  sync.Mutex
	ipv6Off bool

	closeOnce sync.Once
	closeErr  error
}

// Open creates the TUN interface name (a "%d" in it is filled in by the
// kernel) with the given MTU and number of queues, offloads on, brings it up
// and returns it without addresses or routes: add them with AddAddress and
// AddRoute. The interface is created in the network namespace of the
// calling thread. It is OpenOptions with the zero Options.
func Open(name string, mtu, queues int) (*Device, error) {
	return OpenOptions(name, mtu, queues, Options{})
}

// OpenOptions is Open with options.
func OpenOptions(name string, mtu, queues int, opts Options) (*Device, error) {
	if queues < 1 || queues > MaxQueues {
		return nil, fmt.Errorf("tun: %d queues, want 1 to %d", queues, MaxQueues)
	}
	if len(name) >= unix.IFNAMSIZ {
		return nil, fmt.Errorf("tun: name %q longer than %d bytes", name, unix.IFNAMSIZ-1)
	}
	nl, err := openRTNL()
	if err != nil {
		return nil, err
	}
	d := &Device{nl: nl, index: -1, table: opts.RouteTable}
	ok := false
	defer func() {
		if !ok {
			d.Close()
		}
	}()

	flags := uint16(unix.IFF_TUN | unix.IFF_NO_PI | unix.IFF_VNET_HDR)
	if queues > 1 {
		// Every queue must carry the flag, or TUNSETIFF fails with EINVAL.
		flags |= unix.IFF_MULTI_QUEUE
	}
	for i := range queues {
		fd, actual, err := attachQueue(name, flags)
		if err != nil {
			return nil, fmt.Errorf("tun: %s queue %d: %w", name, i, err)
		}
		if i == 0 {
			name, d.name = actual, actual
		}
		if i > 0 || !opts.Monitor {
			// Offloads and their memory come with the first packet.
			d.addQueue(newIdleQueue(fd))
			continue
		}
		// As CreateTUN does: sets TUNSETOFFLOAD and the MTU by ioctl and
		// starts the link event listener.
		q, err := wgtun.CreateTUNFromFile(os.NewFile(uintptr(fd), cloneDevicePath), mtu)
		if err != nil {
			return nil, fmt.Errorf("tun: %s queue %d: %w", name, i, err)
		}
		// Nobody reads link events; drain them, or the listener blocks
		// and never exits after Close.
		go func(ev <-chan wgtun.Event) {
			for range ev {
			}
		}(q.Events())
		d.addQueue(newActiveQueue(q))
	}
	if d.index, err = ifIndex(d.name); err != nil {
		return nil, fmt.Errorf("tun: %s: index: %w", d.name, err)
	}
	// Down, so that setting the MTU and queue length walks little and
	// waits for nothing (see Options).
	if err := d.nl.setup(d.index, mtu, opts.TxQueueLen); err != nil {
		return nil, fmt.Errorf("tun: %s: set link mtu %d txqueuelen %d: %w", d.name, mtu, opts.TxQueueLen, err)
	}
	d.grouped = true
	if opts.NoIPv6 {
		// Here, on the thread that made the device, which is in its
		// namespace. A failure (a read-only /proc/sys) leaves IPv6 on:
		// slower to bring up, and nothing else.
		d.ipv6Off, _ = setDisableIPv6(d.name, true)
	}
	if !opts.Down {
		if err := d.SetLink(0, true); err != nil {
			return nil, err
		}
	}
	ok = true
	return d, nil
}

func (d *Device) addQueue(q *queue) {
	d.qs = append(d.qs, q)
	d.queues = append(d.queues, q)
}

// attachQueue opens /dev/net/tun and attaches it, non-blocking, to the
// interface name (creating it), returning the fd and the interface's name.
func attachQueue(name string, flags uint16) (int, string, error) {
	fd, err := unix.Open(cloneDevicePath, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", err
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return -1, "", err
	}
	ifr.SetUint16(flags)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return -1, "", fmt.Errorf("TUNSETIFF: %w", err)
	}
	// Non-blocking before the fd is handed to the Go poller.
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, "", err
	}
	return fd, ifr.Name(), nil
}

func ifIndex(name string) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return 0, err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFINDEX, ifr); err != nil {
		return 0, err
	}
	return int(ifr.Uint32()), nil
}

// Name is the interface's name.
func (d *Device) Name() string { return d.name }

// Index is the interface's index in its network namespace.
func (d *Device) Index() int { return d.index }

// Queues returns the device's queues; the slice must not be modified.
// Each has the methods of a golang.zx2c4.com/wireguard/tun.Device that
// Queue lists, and SetReadDeadline (see Device.SetReadDeadline).
func (d *Device) Queues() []Queue { return d.queues }

// SetReadDeadline makes a blocked or later Read of queue q return an
// error matching os.ErrDeadlineExceeded once t has passed; the zero time
// removes the deadline.
func (d *Device) SetReadDeadline(q int, t time.Time) error { return d.qs[q].SetReadDeadline(t) }

// ActiveQueues is how many queues have their offload machinery: those
// that carried a packet.
func (d *Device) ActiveQueues() int {
	n := 0
	for _, q := range d.qs {
		if q.active() {
			n++
		}
	}
	return n
}

// BatchSize is the largest batch a queue reads or writes at once: 128 with
// offloads (always, on Linux), else 1.
func (d *Device) BatchSize() int { return d.queues[0].BatchSize() }

// SetLink sets the MTU (unless mtu is 0) and brings the interface up or
// down.
func (d *Device) SetLink(mtu int, up bool) error {
	if err := d.nl.setLink(d.index, mtu, up); err != nil {
		return fmt.Errorf("tun: %s: set link mtu %d up %v: %w", d.name, mtu, up, err)
	}
	d.up.Store(up)
	return nil
}

// SetMTU sets the MTU and brings the interface up.
func (d *Device) SetMTU(mtu int) error { return d.SetLink(mtu, true) }

// SetTxQueueLen sets the length of the device's transmit queue (ip link
// set DEV txqueuelen N): how many packets the kernel holds for the daemon
// to read before it drops them.
func (d *Device) SetTxQueueLen(n int) error {
	if err := d.nl.setTxQueueLen(d.index, n); err != nil {
		return fmt.Errorf("tun: %s: set txqueuelen %d: %w", d.name, n, err)
	}
	return nil
}

// AddAddress adds p's address with p's prefix length (10.10.0.1/24), as
// `ip addr add` does; IPv6 addresses skip duplicate address detection.
// Adding an address the interface has is not an error.
//
// When the interface is up, AddAddress returns once packets to the address
// are delivered locally: for IPv6 the kernel installs the local route from
// a work queue even without DAD, so it waits for it (at most
// localRouteWait, polling).
func (d *Device) AddAddress(p netip.Prefix) error {
	if err := d.AddAddressNoWait(p); err != nil {
		return err
	}
	if p.Addr().Unmap().Is6() && d.up.Load() {
		d.WaitLocal(p.Addr())
	}
	return nil
}

// AddAddressNoWait is AddAddress without the wait for an IPv6 address to
// become deliverable: for many addresses, WaitLocal for each once all are
// added finds most of them deliverable at once, where AddAddress would
// sleep for each.
func (d *Device) AddAddressNoWait(p netip.Prefix) error {
	if err := d.nl.addAddr(d.index, p); err != nil {
		return fmt.Errorf("tun: %s: add address %v: %w", d.name, p, err)
	}
	return nil
}

// WaitLocal returns once packets to a, an address of the device, are
// delivered locally, or after localRouteWait: for IPv6 the kernel installs
// the local route from a work queue even without DAD. An address that is
// not local in time is there and will work shortly, which is not an
// error.
func (d *Device) WaitLocal(a netip.Addr) {
	sleep := 50 * time.Microsecond
	for deadline := time.Now().Add(localRouteWait); ; {
		local, err := d.nl.isLocal(a)
		if err != nil || local || time.Now().After(deadline) {
			return
		}
		time.Sleep(sleep)
		sleep = min(2*sleep, 10*time.Millisecond)
	}
}

// localRouteWait bounds how long AddAddress waits for an IPv6 address to
// become deliverable.
const localRouteWait = time.Second

// RemoveAddress removes an address added by AddAddress; removing one the
// interface does not have is not an error.
func (d *Device) RemoveAddress(p netip.Prefix) error {
	if err := d.nl.delAddr(d.index, p); err != nil {
		return fmt.Errorf("tun: %s: remove address %v: %w", d.name, p, err)
	}
	return nil
}

// AddRoute routes the prefix p into the interface (in the main table, or
// Options.RouteTable), replacing
// any route of the same prefix, as `ip route replace P dev NAME` does. The
// interface must be up.
func (d *Device) AddRoute(p netip.Prefix) error {
	if err := d.nl.addRoute(d.index, d.table, p); err != nil {
		return fmt.Errorf("tun: %s: add route %v: %w", d.name, p, err)
	}
	return nil
}

// RemoveRoute removes a route added by AddRoute; removing one that is not
// there is not an error.
func (d *Device) RemoveRoute(p netip.Prefix) error {
	if err := d.nl.delRoute(d.index, d.table, p); err != nil {
		return fmt.Errorf("tun: %s: remove route %v: %w", d.name, p, err)
	}
	return nil
}

// Close removes the interface and closes its queues. Blocked reads return
// an error that matches os.ErrClosed. Close is idempotent.
func (d *Device) Close() error {
	d.close(true)
	return d.closeErr
}

// close closes the device once; del says whether the interface is still
// to be removed (CloseAll removes it with others).
func (d *Device) close(del bool) {
	d.closeOnce.Do(func() {
		var errs []error
		// Delete first, synchronously, so the name is free when Close
		// returns even while a reader still holds a queue's fd.
		if del && d.index > 0 {
			if err := d.nl.delLink(d.index); err != nil {
				errs = append(errs, fmt.Errorf("tun: %s: delete: %w", d.name, err))
			}
		}
		for _, q := range d.qs {
			if err := q.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
				errs = append(errs, err)
			}
		}
		if d.grouped {
			d.nl.ns.groupMu.Lock()
			d.nl.ns.grouped--
			d.nl.ns.groupMu.Unlock()
		}
		errs = append(errs, d.nl.close())
		d.closeErr = errors.Join(errs...)
	})
}
