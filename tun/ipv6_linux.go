package tun

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// IPv6 off on IPv4-only interfaces (Options.NoIPv6). Every link that
// comes up makes the kernel walk every IPv6 route of the namespace
// (rt6_sync_up), and a link with IPv6 on adds its own multicast route
// (ff00::/8, addrconf_add_mroute) to the routes the next walks cover, so
// bringing up N links costs N² route visits. A link with IPv6 disabled
// adds no route, and when all are IPv4-only the walks cover an almost
// empty table. Linux has no netlink attribute for disable_ipv6 (only
// for address generation and the token), hence the sysctl file.

// ipv6Conf is the directory of the per-device IPv6 settings of the
// calling thread's network namespace: files under /proc/sys/net follow
// the namespace of the thread that opens them, not the mount.
const ipv6Conf = "/proc/sys/net/ipv6/conf/"

// setDisableIPv6 writes the device's disable_ipv6 from the calling
// thread, which must be in the device's namespace. A kernel without IPv6
// has no such file and nothing to do: it reports false, nil.
func setDisableIPv6(name string, off bool) (bool, error) {
	v := []byte("0\n")
	if off {
		v[0] = '1'
	}
	// Interface names have no '/' and are never "." or "..": the name
	// is one path element as it is, dots and all.
	err := os.WriteFile(ipv6Conf+name+"/disable_ipv6", v, 0)
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(ipv6Conf); errors.Is(serr, fs.ErrNotExist) {
			return false, nil
		}
	}
	return err == nil, err
}

// EnableIPv6 turns IPv6 back on for a device opened with Options.NoIPv6,
// before an IPv6 address or route is added to it (the kernel refuses an
// IPv6 address on a device with IPv6 disabled). It does nothing on a
// device whose IPv6 is on. It may be called from any thread.
func (d *Device) EnableIPv6() error {
	d.ipv6Mu.Lock()
	defer d.ipv6Mu.Unlock()
	if !d.ipv6Off {
		return nil
	}
	if err := d.nl.inNamespace(func() error {
		_, err := setDisableIPv6(d.name, false)
		return err
	}); err != nil {
		return fmt.Errorf("tun: %s: enable IPv6: %w", d.name, err)
	}
	d.ipv6Off = false
	return nil
}

// inNamespace runs f on a thread in the handles' namespace: the calling
// one if it is there (as during start-up), else a thread of its own that
// enters it and is thrown away afterwards.
func (c *rtnl) inNamespace(f func() error) error {
	if id, err := threadNS(); err == nil && id == c.ns.id {
		return f()
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.h == nil || c.ns.raw == nil {
		return ErrClosed
	}
	// The namespace of the shared socket (SIOCGSKNS): no descriptor
	// of the namespace is kept for this rare case.
	fd, err := unix.IoctlRetInt(c.ns.raw.Socket.GetFd(), unix.SIOCGSKNS)
	if err != nil {
		return fmt.Errorf("namespace of the netlink socket: %w", err)
	}
	defer unix.Close(fd)
	done := make(chan error, 1)
	go func() {
		// Never unlocked: the thread, in another namespace now, ends
		// with the goroutine.
		runtime.LockOSThread()
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("setns: %w", err)
			return
		}
		done <- f()
	}()
	return <-done
}
