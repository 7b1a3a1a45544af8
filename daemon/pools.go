package daemon

import (
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/pool"
)

// leaseFlushInterval is how often the pools' leases are written to
// state_dir when they changed: a crash loses at most this much of them.
const leaseFlushInterval = time.Second

// poolKeeper holds the config's address pools (package pool) and keeps
// their leases in state_dir: read at start, written every
// leaseFlushInterval when they changed (saveLeases) and at stop. Its set
// exists from the start, empty without pools, so that IKE (ikenode) holds
// the one set a reload fills.
type poolKeeper struct {
	mu sync.Mutex
	// mu guards:
	set  *pool.Set // nil before startPools
	dir  string    // state_dir, fixed at start
	stop chan struct{}
	done chan struct{}
	log  *logrus.Entry
}

// pools returns the running pools, or nil.
func (k *poolKeeper) pools() *pool.Set {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.set
}

// startPools makes cfg's pools, with the leases state_dir kept, and starts
// saving them. A leases file that cannot be read is logged and replaced:
// clients then get new addresses, as from a gateway that keeps none.
func (n *Daemon) startPools(cfg *config.Config) {
	k := &n.pools
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.set != nil {
		return
	}
	k.log = n.log.WithField("part", "pool")
	k.set, k.dir = cfg.PoolSet(), cfg.StateDir
	if len(cfg.Pools) > 0 {
		k.loadLeases()
	}
	k.stop, k.done = make(chan struct{}), make(chan struct{})
	go k.saveLeases(k.set, k.stop, k.done)
}

// loadLeases reads the leases of the last run (pool.Set.Load).
func (k *poolKeeper) loadLeases() {
	switch got, err := k.set.Load(k.dir); {
	case err != nil:
		k.log.WithError(err).Warn("pool: the leases of the last run are lost; clients get new addresses")
	case got > 0:
		k.log.Infof("pool: %d leases of the last run kept for their identities", got)
	}
}

// saveLeases writes set's leases every leaseFlushInterval when they
// changed, and once more when stop closes.
func (k *poolKeeper) saveLeases(set *pool.Set, stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(leaseFlushInterval)
	defer t.Stop()
	failed := false
	for {
		select {
		case <-t.C:
		case <-stop:
			if err := set.Flush(k.dir); err != nil {
				k.log.WithError(err).Error("pool: stopping")
			}
			return
		}
		// A failure is logged once, until a write works again.
		switch err := set.Flush(k.dir); {
		case err != nil && !failed:
			k.log.WithError(err).Error("pool: leases not saved; retrying every second")
			failed = true
		case err == nil && failed:
			k.log.Info("pool: leases saved again")
			failed = false
		}
	}
}

// reloadPools applies a reloaded config's pools, beside those vici
// loaded: those of the same name and addresses keep their leases
// (pool.Set.Replace).
func (n *Daemon) reloadPools(cfg *config.Config) {
	if n.pools.pools() == nil { // a Daemon that New made, not Start
		n.startPools(cfg)
		return
	}
	n.syncPoolSet(cfg) // the file's and vici's (vici_pools.go)
}

// stopPools saves the leases a last time.
func (n *Daemon) stopPools() {
	k := &n.pools
	k.mu.Lock()
	stop, done := k.stop, k.done
	k.stop = nil
	k.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

// The control socket's pool command (control.PoolBackend).

var _ control.PoolBackend = (*backend)(nil)

func (b *backend) PoolList(leases bool) ([]control.PoolInfo, error) {
	set := (*Daemon)(b).pools.pools()
	if set == nil || len(set.Pools()) == 0 {
		return nil, control.ErrNoPools
	}
	return poolInfos(set, leases), nil
}

// poolInfos describes set's pools, with their leases when leases is set.
func poolInfos(set *pool.Set, leases bool) []control.PoolInfo {
	var out []control.PoolInfo
	for _, p := range set.Pools() {
		st := p.Stats()
		pi := control.PoolInfo{Name: p.Name(), Addrs: p.Range().String(), Size: st.Size, Online: st.Online, Offline: st.Offline}
		if leases {
			pi.Leases = []control.PoolLease{}
			for _, l := range p.Leases() {
				status := "offline"
				if l.Online {
					status = "online"
				}
				pi.Leases = append(pi.Leases, control.PoolLease{Address: l.Addr, Identity: l.ID, Status: status})
			}
		}
		out = append(out, pi)
	}
	return out
}
