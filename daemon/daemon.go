package daemon

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"sync"
	"time"

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

	guards      *guards // fail-closed guard routes (guards.go)
	started     bool    // startNode succeeded; a failed start keeps the guards it found
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

// startNode brings a config up. On failure it removes what it made and
// returns the Daemon, for tests to look at.
func startNode(cfg *config.Config, log *logrus.Logger) (n *Daemon, err error) {
	n = &Daemon{log: log, cfg: cfg, events: &control.Monitor{}}
	// Inbound work spreads over as many workers as the widest interface
	// has queues; more than there are CPUs gains nothing.
	queues := 1
	for _, c := range cfg.Interfaces {
		queues = max(queues, c.Queues)
	}
	core, err := ipnode.New(ipnode.Config{
		Underlay:       underlay.Config{UDP: cfg.Underlay.UDP, RawESP: cfg.Underlay.RawESP, Mark: cfg.Underlay.Mark},
		InboundWorkers: min(queues, runtime.GOMAXPROCS(0)),
		StateDir:       cfg.StateDir,
		Log:            log,
		Events:         func(ev ipnode.Event) { n.events.Publish(MonitorEvent(ev)) },
	})
	if err != nil {
		return n, err
	}
	n.attach(core)
	defer func() {
		if err != nil {
			// Closing the core empties the SAD, which zeroes the SAs'
			// keys; cfg's own keys are the caller's (see Start).
			n.stop()
		}
	}()

	b, err := n.buildStates(cfg)
	if err != nil {
		return n, err
	}
	if _, err := n.core.Sync(b, cfg.Policies); err != nil {
		return n, fmt.Errorf("%s: %w", cfg.File, err)
	}
	// The SAs are checked and in: now the sockets.
	if err := n.core.Start(); err != nil {
		return n, err
	}
	n.conn = n.core.Underlay()

	// Guards before routes: a prefix is guarded before it is routed, and
	// one a crashed run left stays guarded throughout (adopt removes
	// none the config wants). They go in once the interfaces are up and
	// before any has an address or route: every link that comes up
	// makes the kernel walk all IPv6 routes, and 10,000 interfaces'
	// guards there made start-up take minutes (xfrmif/bringup.go).
	start := time.Now()
	_, err = n.core.SyncInterfacesGuarded(interfaceConfigs(cfg), func() error {
		var err error
		n.guards, err = openGuards(cfg, log.WithField("part", "fail-closed"))
		return err
	})
	if err != nil {
		return n, err
	}
	log.WithField("took", time.Since(start).Round(time.Millisecond)).Infof("%d interfaces up", n.reg.Len())

	// Pools and IKE before the control socket: whoever sees the socket
	// answer (a probe, a test) may ask for ike list at once.
	n.startPools(cfg)
	if err := n.startIKE(cfg); err != nil {
		return n, err
	}
	n.ctl, err = control.Listen(cfg.Control, (*backend)(n), log.WithField("part", "control"))
	if err != nil {
		return n, err
	}
	n.ctl.Events = n.events
	go n.ctl.Serve()
	if err := n.openVici(cfg.Vici); err != nil {
		return n, err
	}

	if cfg.Metrics != "" {
		ln, err := net.Listen("tcp", cfg.Metrics)
		if err != nil {
			return n, fmt.Errorf("metrics: %w", err)
		}
		n.metricsAddr = ln.Addr()
		if w := metricsExposureWarning(ln.Addr(), cfg.Pprof); w != "" {
			log.Warn(w)
		}
		log.WithFields(logrus.Fields{"addr": ln.Addr(), "pprof": cfg.Pprof}).Info("metrics: serving /metrics")
		n.metrics = &http.Server{Handler: metricsHandler(n, cfg.Pprof), ReadHeaderTimeout: 5 * time.Second}
		go n.metrics.Serve(ln)
	}
	n.started = true
	return n, nil
}

// buildStates makes the config file's SAs (ipnode.Node.BuildStates: the
// running ones it names unchanged are kept, a changed one or a used key
// refuses the file), with its errors as FILE:LINE: states[i].field.
func (n *Daemon) buildStates(cfg *config.Config) (*ipnode.Build, error) {
	configs := make([]sa.Config, len(cfg.States))
	for i, st := range cfg.States {
		configs[i] = st.Config
	}
	b, err := n.core.BuildStates(ipnode.OwnerFile, configs)
	var fes ipnode.FieldErrors
	if errors.As(err, &fes) {
		errs := make(config.ErrorList, len(fes))
		for i, e := range fes {
			field := fmt.Sprintf("states[%d]", e.Index)
			if e.Field != "" {
				field += "." + e.Field
			}
			errs[i] = &config.Error{File: cfg.File, Line: cfg.States[e.Index].Line, Field: field, Msg: e.Msg}
		}
		return nil, errs
	}
	return b, err
}

func interfaceConfigs(cfg *config.Config) []xfrmif.Config {
	out := make([]xfrmif.Config, len(cfg.Interfaces))
	for i, c := range cfg.Interfaces {
		out[i] = xfrmif.Config{Name: c.Name, IfID: c.IfID, MTU: c.MTU, Addresses: c.Addresses, Routes: c.Routes, Queues: c.Queues, Table: c.Table, TxQueueLen: c.TxQueueLen}
	}
	return out
}

// reload applies the config file at path (SIGHUP, ipsecd reload) and
// returns what changed, or why it was refused: the file's FILE:LINE
// errors, or what could not be made. A file that does not parse, or
// whose SAs or interfaces cannot be made, is refused whole and the
// running config stays. SAs unchanged in the file keep their state; the
// file owns what it names and what earlier files brought, and a reload
// changes only that: SAs and policies added over the control socket stay
// (package node, Ownership). Once applied, the new file's warnings are
// logged and the replaced config's keys zeroed (the SAs hold copies of
// their own).
func (n *Daemon) reload(path string) (control.ReloadResult, error) {
	cfg, err := config.Load(path) // on error, Load has zeroed what it decoded
	if err != nil {
		n.log.WithField("config", path).Errorf("reload refused, the running config stays:\n%v", err)
		return control.ReloadResult{File: path}, err
	}
	res, prev, err := n.applyConfig(cfg)
	if err != nil {
		return res, err
	}
	logConfigWarnings(n.log.WithField("config", path), cfg)
	res.Warnings = cfg.Warnings
	if prev != cfg {
		prev.WipeKeys()
	}
	return res, nil
}

// apply is applyConfig for callers that need only whether cfg was
// applied (the previous config's keys are then theirs to zero).
func (n *Daemon) apply(cfg *config.Config) (applied bool) {
	_, _, err := n.applyConfig(cfg)
	return err == nil
}

// applyConfig makes cfg, just loaded, the running config, or refuses it
// with the error it logged. Once applied, cfg is n.cfg, and prev, the
// config it replaced, is the caller's to zero (its keys). When refused,
// the SAs made for cfg are Discarded and cfg's keys zeroed here: nothing
// of it will be used. The running config and SAs are never wiped.
func (n *Daemon) applyConfig(cfg *config.Config) (res control.ReloadResult, prev *config.Config, err error) {
	res.File = cfg.File
	log := n.log.WithField("config", cfg.File)
	n.mu.Lock()
	defer n.mu.Unlock()
	prev = n.cfg
	applied := false
	defer func() {
		if !applied && cfg != n.cfg {
			cfg.WipeKeys()
		}
	}()
	// Whatever the outcome, the guards end up covering the running
	// config and what the interfaces still have: here for a refused
	// reload, and before the "reloaded" line for an applied one, so that
	// whoever reads that line finds the guards already in step.
	syncGuards := func() {
		if err := n.guards.sync(wantGuards(n.cfg, n.reg)); err != nil {
			log.WithError(err).Error("reload: fail-closed guards")
		}
	}
	defer func() {
		if !applied {
			syncGuards()
		}
	}()
	if cfg.Underlay != n.cfg.Underlay {
		log.Warn("reload: underlay changes take effect on restart")
	}
	if cfg.Control != n.cfg.Control || cfg.Metrics != n.cfg.Metrics || cfg.Pprof != n.cfg.Pprof || cfg.StateDir != n.cfg.StateDir {
		log.Warn("reload: control, metrics, pprof and state_dir changes take effect on restart")
	}
	b, err := n.buildStates(cfg)
	if err != nil {
		log.Errorf("reload refused, the running config stays:\n%v", err)
		return res, prev, err
	}
	// Guards of new routes before the routes; those of removed ones
	// go after them (syncGuards).
	if err := n.guards.ensure(wantGuards(cfg, n.reg)); err != nil {
		log.WithError(err).Error("reload: fail-closed guards")
	}
	// Interfaces first, so that SAs of new interfaces have somewhere
	// to deliver; then the SAD, new SAs in before old ones go
	// (make-before-break happens in one table swap).
	ifs, err := n.core.SyncInterfaces(interfaceConfigs(cfg))
	if err != nil && len(ifs.Added)+len(ifs.Removed)+len(ifs.Reconfigured)+len(ifs.Replaced)+len(ifs.Unchanged) == 0 {
		b.Discard()
		log.WithError(err).Error("reload refused, the running config stays")
		return res, prev, fmt.Errorf("reload refused, the running config stays: %w", err)
	}
	if err != nil {
		log.WithError(err).Error("reload: some interfaces failed")
		res.Warnings = append(res.Warnings, "some interfaces failed: "+err.Error())
	}
	ch, err := n.core.Sync(b, cfg.Policies)
	if err != nil {
		// Sync changes nothing when it fails: the running SAs stay.
		log.WithError(err).Error("reload: SAD")
		return res, prev, fmt.Errorf("reload refused, the running SAs stay: %w", err)
	}
	n.cfg = cfg
	applied = true
	n.reloadPools(cfg) // before IKE, whose new connections hand out their addresses
	n.reloadIKE(cfg)
	if err := n.reloadVici(cfg.Vici); err != nil {
		log.WithError(err).Error("reload")
		res.Warnings = append(res.Warnings, err.Error())
	}
	// The file is checked, so its log section is valid: apply it last,
	// so that a refused reload changes nothing.
	if err := ConfigureLog(n.log, cfg.Log); err != nil {
		log.WithError(err).Error("reload: log")
	}
	syncGuards()
	res = control.ReloadResult{File: cfg.File, Warnings: res.Warnings,
		InterfacesAdded: len(ifs.Added), InterfacesRemoved: len(ifs.Removed), InterfacesReconfigured: len(ifs.Reconfigured),
		InterfacesReplaced: len(ifs.Replaced),
		StatesAdded:        ch.StatesAdded, StatesRemoved: ch.StatesRemoved, StatesKept: ch.StatesKept, StatesTaken: ch.StatesTaken,
		StatesUpdated: ch.StatesUpdated, PoliciesAdded: ch.PoliciesAdded, PoliciesRemoved: ch.PoliciesRemoved,
		PoliciesKept: ch.PoliciesKept, PoliciesTaken: ch.PoliciesTaken}
	log.WithFields(logrus.Fields{
		"added": res.InterfacesAdded, "removed": res.InterfacesRemoved, "reconfigured": res.InterfacesReconfigured,
		"replaced":     res.InterfacesReplaced,
		"states_added": ch.StatesAdded, "states_removed": ch.StatesRemoved, "states_kept": ch.StatesKept, "states_taken": ch.StatesTaken,
		"states_updated": ch.StatesUpdated,
		"policies_added": ch.PoliciesAdded, "policies_removed": ch.PoliciesRemoved, "policies_kept": ch.PoliciesKept,
		"policies_taken": ch.PoliciesTaken,
	}).Info("reloaded: " + cfg.Summary())
	return res, prev, nil
}

// stop closes the control socket and metrics, then the core (interfaces,
// sockets, workers, state directory; the SAD is emptied, which zeroes
// the SAs' keys), then removes the fail-closed guards unless the config
// keeps them. It waits for the workers for a few seconds at most.
func (n *Daemon) stop() error {
	var errs []error
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
	keep := false
	if cfg := n.runningConfig(); cfg != nil { // nil in tests' hand-made nodes
		keep = cfg.FailClosed.KeepOnStop
	}
	errs = append(errs, n.guards.close(keep, !n.started))
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
