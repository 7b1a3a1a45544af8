package daemon

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/ikenode"
	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/underlay"
)

// ikeRunner is the daemon's IKE (package ikenode), started when the config
// has connections (at start or at a reload). The node hands it IKE on
// port 4500 and acquires through the handlers startIKE sets.
type ikeRunner struct {
	mgr    atomic.Pointer[ikenode.Daemon]
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex // serialises start and stop
}

// running returns the running IKE daemon, or nil.
func (r *ikeRunner) running() *ikenode.Daemon { return r.mgr.Load() }

// startIKE starts IKE for cfg's connections, unless it runs or there
// are none.
func (n *Daemon) startIKE(cfg *config.Config) error {
	r := &n.ike
	r.mu.Lock()
	defer r.mu.Unlock()
	ic := n.ikeConfig(cfg) // the file's connections and vici's
	if r.mgr.Load() != nil || len(ic.Connections) == 0 {
		return nil
	}
	log := n.log.WithField("part", "ike")
	if p := n.conn.Port(); p != underlay.DefaultPort {
		log.Warnf("ike: the underlay's UDP port is %d: IKE moves to port 4500 after NAT detection (RFC 7296 §2.23), and ESP in UDP with it, so connections that need UDP encapsulation will not work", p)
	}
	radius := n.radius.start(ic.EAPRADIUS, log)
	var router ikenode.Router // a road warrior's routes; none in tests' hand-made nodes
	if n.routes != nil {
		router = n.routes
	}
	acct, interval := n.radius.accounting()
	m, err := ikenode.New(ikenode.Config{
		IKE:  ic,
		Node: n.core,
		NATT: n.conn,
		// The local address of IKE on port 4500 when the underlay is
		// bound to one address (IP_PKTINFO tells it otherwise).
		NATTAddr: cfg.Underlay.UDP.Addr().Unmap(),
		RawESP:   cfg.Underlay.RawESP,
		Mark:     cfg.Underlay.Mark,
		Trap:     true, // the node raises acquires (node.Node.SetAcquireHandler)
		Stats:    ikenode.StatsFromSAD(n.sad),
		Pools:    n.pools.pools(),
		Router:   router,
		RADIUS:   radius,
		// The sessions of eap-radius users, when eap_radius.accounting.
		Accounting: acct, AccountingInterval: interval,
		Log: log,
		// IKE's own events go to ipsecd monitor with the node's
		// (Publish never blocks the IKE goroutine).
		OnEvent: func(ev ikenode.Event) { n.events.Publish(IKEEvent(ev)) },
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	r.mgr.Store(m)
	// IKE on port 4500 comes through the underlay; packets a trap
	// policy lets through with no SA start IKE (start_action: trap).
	n.core.SetNonESPHandler(m.DeliverNonESP)
	n.core.SetAcquireHandler(func(a sa.Acquire) { m.Acquire(a.Policy.IfID, a.Src, a.Dst) })
	go func() {
		defer close(r.done)
		m.Run(ctx)
	}()
	log.WithField("port", m.Port()).Infof("ike: %d connections", len(ic.Connections))
	return nil
}

// reloadIKE applies a reloaded config's connections.
func (n *Daemon) reloadIKE(cfg *config.Config) {
	m := n.ike.running()
	if m == nil {
		if err := n.startIKE(cfg); err != nil {
			n.log.WithError(err).Error("reload: ike")
		}
		return
	}
	n.radius.reload(cfg.EAPRADIUS, n.log)
	res, err := m.Reload(n.ikeConfig(cfg))
	if err != nil {
		n.log.WithError(err).Error("reload: ike")
		return
	}
	n.log.WithFields(map[string]any{"added": res.Added, "removed": res.Removed, "changed": res.Changed, "unchanged": res.Unchanged}).Info("reload: ike connections")
}

// stopIKE deletes the IKE SAs (the peers learn at once) and stops the
// IKE daemon, waiting a few seconds at most.
func (n *Daemon) stopIKE() {
	r := &n.ike
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mgr.Load() == nil {
		return
	}
	n.core.SetNonESPHandler(nil)
	n.core.SetAcquireHandler(nil)
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
		n.log.Warn("ike: did not stop within 5 s")
	}
	r.mgr.Store(nil)
	n.radius.stop()
}

// The control socket's ike commands (control.IKEBackend).

var _ control.IKEBackend = (*backend)(nil)

func (b *backend) ikeDaemon() (*ikenode.Daemon, error) {
	m := b.ike.running()
	if m == nil {
		return nil, control.ErrNoIKE
	}
	return m, nil
}

func (b *backend) IKEList() ([]control.IKESAInfo, error) {
	m, err := b.ikeDaemon()
	if err != nil {
		return nil, err
	}
	return m.List()
}

func (b *backend) IKEInitiate(t control.IKETarget) error {
	return b.ikeAct(t, (*ikenode.Daemon).Initiate)
}
func (b *backend) IKETerminate(t control.IKETarget) error {
	return b.ikeAct(t, (*ikenode.Daemon).Terminate)
}
func (b *backend) IKERekey(t control.IKETarget) error { return b.ikeAct(t, (*ikenode.Daemon).Rekey) }

func (b *backend) ikeAct(t control.IKETarget, f func(*ikenode.Daemon, ikenode.Target) error) error {
	m, err := b.ikeDaemon()
	if err != nil {
		return err
	}
	return f(m, t)
}
