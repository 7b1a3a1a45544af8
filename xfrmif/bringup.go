package xfrmif

import (
	"github.com/ipsecd/ipsecd/internal/parallel"
	"github.com/ipsecd/ipsecd/tun"
)

// Bringing up many TUN interfaces is dominated by the kernel, not by
// netlink: each MTU change and each link that comes up makes it walk
// every IPv6 route of the namespace (rt6_mtu_change, rt6_sync_up), so
// the order of the steps decides how long start-up takes. Doing them
// interface by interface, with the guards in place first, made every
// walk cover the routes of all the interfaces before (10,000 interfaces:
// 4 minutes). Sync therefore does each step for all new interfaces before
// the next step:
//
//  1. open every device, down, with its MTU and transmit queue length
//     (bringUp): the MTU walks find only the routes that were there
//     before, and a queue length set while the link is down costs no
//     RCU grace period (tun.Options.TxQueueLen); an IPv4-only one gets
//     IPv6 disabled (tun.Options.NoIPv6, see ipv4Only), so that it adds
//     no multicast route in step 2;
//  2. bring every device up (bringUp): each walk finds the multicast
//     route (ff00::/8) of the devices already up, and nothing else new;
//  3. the caller's guard step (SyncGuarded): guard routes, before any
//     route into an interface exists;
//  4. addresses and routes (configure): adding them walks nothing; the
//     wait for the IPv6 addresses to become deliverable comes after all
//     are added.
//
// Steps 2 and 4 run on several goroutines: each step is a netlink round
// trip whose kernel work is short, and the shared netlink handles of the
// namespace (package tun) serve any goroutine.

// bringUpParallelism bounds the goroutines of steps 2 and 4. The kernel
// serialises most of the work behind its RTNL lock, so more only adds
// contention; a few overlap one request's system calls and wake-ups with
// another's kernel work.
const bringUpParallelism = 8

// bringUp opens, sets the MTU of and brings up a TUN device for each of
// cfgs (validated, with defaults), and records the failures; a failed
// one is nil. It makes none when the registry has a Create hook.
func (r *Registry) bringUp(cfgs []Config, failed *SyncError) []*tun.Device {
	if r.Create != nil || len(cfgs) == 0 {
		return nil
	}
	devs := make([]*tun.Device, len(cfgs))
	errs := make([]error, len(cfgs))
	// On the calling goroutine: TUNSETIFF makes the device in the
	// namespace of the calling thread.
	for i, c := range cfgs {
		devs[i], errs[i] = openTUN(c, true)
	}
	parallel.For(len(cfgs), bringUpParallelism, func(i int) {
		if errs[i] == nil {
			if errs[i] = devs[i].SetLink(0, true); errs[i] != nil {
				devs[i].Close()
				devs[i] = nil
			}
		}
	})
	for i, c := range cfgs {
		failed.add(c.Name, errs[i])
	}
	return devs
}

// configure makes the interfaces of cfgs over devs (from bringUp; nil for
// those that failed there), or with the Create hook, in order, and
// records the failures; a failed one is nil.
func (r *Registry) configure(cfgs []Config, devs []*tun.Device, failed *SyncError) []*Interface {
	made := make([]*Interface, len(cfgs))
	if r.Create != nil {
		for i, c := range cfgs {
			ifc, err := r.Create(c)
			failed.add(c.Name, err)
			made[i] = ifc
		}
		return made
	}
	errs := make([]error, len(cfgs))
	parallel.For(len(cfgs), bringUpParallelism, func(i int) {
		if devs[i] == nil {
			return
		}
		l := tunLink{Device: devs[i], queues: queuesOf(devs[i]), noWait: true}
		if made[i], errs[i] = newInterface(cfgs[i], l, cfgs[i].MTU, cfgs[i].TxQueueLen); made[i] != nil {
			l.noWait = false // unpublished yet: nobody else has it
			made[i].link = l
		}
	})
	// Once all are added, most IPv6 addresses are deliverable already:
	// a round trip each instead of one or more sleeps each.
	parallel.For(len(cfgs), bringUpParallelism, func(i int) {
		if made[i] == nil {
			return
		}
		for _, p := range made[i].Addresses() {
			if p.Addr().Unmap().Is6() {
				devs[i].WaitLocal(p.Addr())
			}
		}
	})
	for i, c := range cfgs {
		failed.add(c.Name, errs[i])
	}
	return made
}

// unrouting is a TUN device about to be removed, with what was applied to
// it.
type unrouting struct {
	dev *tun.Device
	cfg Config
}

// unroute removes the routes, then the IPv4 addresses, of a TUN device
// about to be removed, ignoring failures (the removal takes whatever is
// left). Removing the devices is what it makes cheaper: a device that
// goes with IPv4 routes through it makes the kernel walk every IPv4 route
// of the namespace (fib_flush), and each IPv6 route of its own lengthens
// the walk over all IPv6 routes that every removal makes anyway
// (rt6_sync_down_dev). Routes before addresses: removing a device's last
// IPv4 address with routes still through it walks every IPv4 route too.
// IPv6 addresses stay: removing one walks every IPv6 route
// (rt6_remove_prefsrc).
func unroute(d unrouting) {
	for _, p := range d.cfg.Routes {
		d.dev.RemoveRoute(p)
	}
	for _, p := range d.cfg.Addresses {
		if p.Addr().Unmap().Is4() {
			d.dev.RemoveAddress(p)
		}
	}
}
