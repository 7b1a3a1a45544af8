package daemon

import (
	"errors"
	"net"
	"net/http"
	"sync"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/control"
	ipnode "github.com/ipsecd/ipsecd/node"
	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/underlay"
	"github.com/ipsecd/ipsecd/vici"
	"github.com/ipsecd/ipsecd/xfrmif"
)

// Daemon is a running daemon: the composition root (package node: SAD,
// interfaces, underlay, engine, ticker, keys, state directory) brought up
// from a config file, with the fail-closed guards, IKE, the control
// socket and the metrics server around it. Its methods are safe for
// concurrent use.
type Daemon struct {
	log  *logrus.Logger
	core *ipnode.Node
	// sad, reg, conn and counters are core's, for the control socket,
	// metrics and tests.
	sad      *sa.SAD
	reg      *xfrmif.Registry
	conn     *underlay.Conn
	counters *sa.Counters

	guards      *guards     // fail-closed guard routes (guards.go)
	routes      *roadRoutes // road warriors' routes and rules (roadroutes.go)
	started     bool        // startNode succeeded; a failed start keeps the guards it found
	ctl         *control.Server
	events      *control.Monitor // what ipsecd monitor streams, and vici's events
	vici        *vici.Server     // vici.go; nil without vici:
	metrics     *http.Server
	metricsAddr net.Addr     // where metrics listens (the port chosen, for ":0")
	ike         ikeRunner    // ike.go
	pools       poolKeeper   // pools.go
	radius      radiusKeeper // radius.go

	mu sync.Mutex
	// mu guards: cfg, loaded, and serialises reloads.
	cfg    *config.Config
	loaded viciLoaded // what vici loaded (vici_load.go)
}

// attach takes core's parts into n's shortcuts (the underlay once the
// core has started).
func (n *Daemon) attach(core *ipnode.Node) {
	n.core = core
	n.sad, n.reg, n.conn, n.counters = core.SAD(), core.Registry(), core.Underlay(), core.Counters()
}

// Start brings cfg, a config file just loaded (config.Load), up: the
// interfaces and their fail-closed guards, the SAs and policies, the
// underlay, IKE when cfg has connections, the control socket and the
// metrics server. It logs the file's warnings first, and logs to log as
// it is (ConfigureLog applies cfg's log section). On failure it removes
// what it made, leaves the guards a previous run left, and returns the
// error; cfg's keys stay the caller's to zero (config.Config.WipeKeys).
// Once started, the Daemon owns cfg: Stop zeroes its keys.
func Start(cfg *config.Config, log *logrus.Logger) (*Daemon, error) {
	logConfigWarnings(log.WithField("config", cfg.File), cfg)
	d, err := startNode(cfg, log)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// Reload applies the config file at path (SIGHUP, ipsecd reload) and
// returns what changed, or why it was refused: the file's FILE:LINE
// errors, or what could not be made. A refused file changes nothing: the
// running config stays. See reload.
func (n *Daemon) Reload(path string) (control.ReloadResult, error) { return n.reload(path) }

// Stop deletes the IKE SAs, closes the control socket and metrics, the
// interfaces, sockets and workers, removes the fail-closed guards unless
// the config keeps them (fail_closed.keep_on_stop), and zeroes every
// key: the SAs' and the running config's. It waits for the workers a few
// seconds at most and returns what failed on the way.
func (n *Daemon) Stop() error {
	err := n.stop()
	n.wipeKeys()
	return err
}

// New returns a Daemon over core, a node the caller built (started or
// not), with no config file, guards, IKE, control socket or metrics of
// its own: what its Backend answers is core's. It serves programs and
// tests that open the control socket themselves (control.Listen); Start
// is the daemon. Its Backend refuses reload (there is no file), and Stop
// closes core.
func New(core *ipnode.Node, log *logrus.Logger) *Daemon {
	n := &Daemon{log: log}
	n.attach(core)
	return n
}

// Backend returns the Daemon as the control socket serves it: a
// control.Backend that is also a control.IKEBackend.
func (n *Daemon) Backend() control.Backend { return (*backend)(n) }

// stop closes the control socket and metrics, then the core (interfaces,
// sockets, workers, state directory; the SAD is emptied, which zeroes
// the SAs' keys), then removes the fail-closed guards unless the config
// keeps them. It waits for the workers for a few seconds at most.
func (n *Daemon) stop() error {
	var errs []error
	keep := false
	if cfg := n.runningConfig(); cfg != nil { // nil in tests' hand-made nodes
		keep = cfg.FailClosed.KeepOnStop
	}
	if keep {
		n.routes.freeze() // a road warrior's guards stay with the others
	}
	n.stopIKE() // while the underlay still carries its deletes; the RADIUS client with it
	n.stopPools()
	if n.ctl != nil {
		errs = append(errs, n.ctl.Close())
	}
	if n.vici != nil {
		errs = append(errs, n.vici.Close())
	}
	if n.metrics != nil {
		errs = append(errs, n.metrics.Close())
	}
	if n.core != nil {
		errs = append(errs, n.core.Close())
	}
	// Guards last: they cover the prefixes until the routes are gone.
	errs = append(errs, n.routes.close(keep, !n.started), n.guards.close(keep, !n.started))
	return errors.Join(errs...)
}

// runningConfig returns the config the node runs.
func (n *Daemon) runningConfig() *config.Config {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cfg
}

// wipeKeys empties the SAD, which zeroes every SA's keys once no worker
// uses them (sa/retire.go), and zeroes the running config's keys. The
// daemon calls it when it stops.
func (n *Daemon) wipeKeys() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.sad.Replace(nil, nil); err != nil {
		n.log.WithError(err).Warn("stopping: emptying the SAD")
	}
	n.cfg.WipeKeys()
	n.loaded.wipe()
}
