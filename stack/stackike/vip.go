package stackike

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/ikenode"
)

// A road warrior's virtual IP (a connection's vips:): the gateway gives
// the address and its DNS servers in a CFG_REPLY, and the IKE runner puts
// the address on the first child's interface, which here is the
// netstack's NIC, as a /32 or /128 (node.Node.AddVirtualIP): what the
// program dials then leaves from it, which is what the child's selectors
// admit. The address goes when no IKE SA holds it any more, and comes
// back, the same one from a gateway that keeps leases, when the
// connection is up again.
//
// The Net tells the program what it got (VirtualIPs, DNS) from the
// runner's list of SAs (ike list's local_vips and dns). The IKE
// goroutine must not block, so OnEvent only signals, and a goroutine of
// the Net's own then asks for the list; it also looks every resyncEvery,
// as the event of an SA's end comes while the runner still lists it.

// resyncEvery bounds how long a virtual IP outlives its IKE SA.
const resyncEvery = time.Second

// vipState is what the gateways gave.
type vipState struct {
	kick chan struct{} // capacity 1: an event came

	mu      sync.Mutex
	vips    []netip.Addr
	dns     []netip.Addr
	changed chan struct{} // closed and replaced when vips, dns or failed change
	err     error         // the last failure to list them
	failed  error         // the last IKE SA that failed (ike_failed), nil once one is up
	// authFailed says that failed is an authentication failure (a wrong
	// password, an unknown user, a certificate refused), which trying
	// again does not mend; stop asks routineVIP to stop the retries of
	// a RoadWarrior (Net.retriesAuth false).
	authFailed, stop bool
}

// event records what WaitVirtualIP tells of ev and signals routineVIP.
// It runs in the IKE goroutine: it takes mu only to set fields.
func (v *vipState) event(ev ikenode.Event) {
	switch ev.Type {
	case ikenode.EventIKEFailed:
		err := fmt.Errorf("stackike: connection %s to %v: %s", ev.Connection, ev.Remote, ev.Reason)
		if ev.Error != "" {
			err = fmt.Errorf("%w: %s", err, ev.Error)
		}
		v.setFailed(err, ev.Reason == ikenode.ReasonAuthFailed)
	case ikenode.EventIKEUp:
		v.setFailed(nil, false)
	}
	v.signal()
}

// setFailed records why the last IKE SA failed and wakes WaitVirtualIP.
func (v *vipState) setFailed(err error, auth bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.failed, v.authFailed, v.stop = err, auth, auth
	close(v.changed)
	v.changed = make(chan struct{})
}

// takeStop reports whether an authentication failure asked for the
// retries to stop since the last call.
func (v *vipState) takeStop() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	stop := v.stop
	v.stop = false
	return stop
}

// signal tells routineVIP that an event came, without blocking.
func (v *vipState) signal() {
	select {
	case v.kick <- struct{}{}:
	default:
	}
}

// routineVIP applies the virtual IPs after each event until ctx ends.
func (n *Net) routineVIP(ctx context.Context) {
	defer close(n.vipDone)
	tick := time.NewTicker(resyncEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.vip.kick:
		case <-tick.C:
		}
		if n.vip.takeStop() && !n.retriesAuth {
			// A wrong password tried again and again would lock the
			// user out at many gateways: the program decides.
			n.ike.Terminate(ikenode.Target{IKE: RoadWarriorConnection})
		}
		list, err := n.ike.List()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			n.setVIPs(nil, nil, fmt.Errorf("stackike: list the IKE SAs: %w", err))
			continue
		}
		vips, dns := configured(list)
		n.setVIPs(vips, dns, nil)
	}
}

// configured returns the virtual IPs and DNS servers of the IKE SAs in
// list that are up (an IKE rekey's old SA and its new one hold the same),
// each once, sorted.
func configured(list []control.IKESAInfo) (vips, dns []netip.Addr) {
	add := func(to []netip.Addr, texts []string) []netip.Addr {
		for _, s := range texts {
			if a, err := netip.ParseAddr(s); err == nil && !slices.Contains(to, a) {
				to = append(to, a)
			}
		}
		return to
	}
	for _, s := range list {
		if s.State != "ESTABLISHED" && s.State != "REKEYED" {
			continue
		}
		vips = add(vips, s.LocalVIPs)
		dns = add(dns, s.DNS)
	}
	slices.SortFunc(vips, netip.Addr.Compare)
	slices.SortFunc(dns, netip.Addr.Compare)
	return vips, dns
}

// setVIPs records what is applied and wakes WaitVirtualIP.
func (n *Net) setVIPs(vips, dns []netip.Addr, err error) {
	v := &n.vip
	v.mu.Lock()
	defer v.mu.Unlock()
	v.err = err
	if slices.Equal(vips, v.vips) && slices.Equal(dns, v.dns) {
		return
	}
	v.vips, v.dns = vips, dns
	close(v.changed)
	v.changed = make(chan struct{})
}

// VirtualIPs returns the addresses the gateways gave this road warrior
// (its connections' vips:), which are the netstack's own while their IKE
// SA is up; none before or without vips.
func (n *Net) VirtualIPs() []netip.Addr {
	n.vip.mu.Lock()
	defer n.vip.mu.Unlock()
	return slices.Clone(n.vip.vips)
}

// DNS returns the DNS servers the gateways named with the virtual IPs
// (INTERNAL_IP4_DNS, INTERNAL_IP6_DNS); Resolver asks them.
func (n *Net) DNS() []netip.Addr {
	n.vip.mu.Lock()
	defer n.vip.mu.Unlock()
	return slices.Clone(n.vip.dns)
}

// WaitVirtualIP waits until the netstack holds a virtual IP from a
// gateway and returns them all. It returns at once when an IKE SA failed
// its authentication (a wrong password, an unknown user, a certificate
// refused: no virtual IP comes without a change); else it returns ctx's
// error with why none came: the last IKE SA that failed (no proposal
// chosen, timeout: the gateway did not answer), if any.
func (n *Net) WaitVirtualIP(ctx context.Context) ([]netip.Addr, error) {
	v := &n.vip
	for {
		v.mu.Lock()
		vips, changed, err, auth := slices.Clone(v.vips), v.changed, errors.Join(v.failed, v.err), v.authFailed
		v.mu.Unlock()
		if len(vips) > 0 {
			return vips, nil
		}
		if auth {
			return nil, err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, errors.Join(fmt.Errorf("stackike: no virtual IP: %w", ctx.Err()), err)
		}
	}
}
