package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/datapath"
	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/seqstate"
	"github.com/ipsecd/ipsecd/underlay"
	"github.com/ipsecd/ipsecd/xfrmif"
)

// node is a running daemon: the SAD, the interfaces, the underlay, the
// forwarding engine and the control socket.
type node struct {
	log      *logrus.Logger
	counters *sa.Counters
	sad      *sa.SAD
	reg      *xfrmif.Registry
	guards   *guards // fail-closed guard routes (guards.go)
	started  bool    // startNode succeeded; a failed start keeps the guards it found
	conn     *underlay.Conn
	engine   *datapath.Engine
	ctl      *control.Server
	metrics  *http.Server
	// metricsAddr is where metrics listens (the port chosen, for ":0").
	metricsAddr net.Addr
	// underlay is what conn was opened with; a reload does not change it.
	underlay config.Underlay

	ctx    context.Context
	cancel context.CancelFunc

	// expiry carries lifetime events from the data path to tick
	// (expiry.go); its zero value is ready.
	expiry expiryQueue

	// seq is the state directory (package seqstate), opened at start;
	// nil when it cannot be used (seqErr says why, stateDir where). It
	// does not change on reload. seqDone is closed when
	// routineSaveTops has returned.
	seq      *seqstate.Dir
	seqErr   error
	stateDir string
	seqDone  chan struct{}

	mu sync.Mutex
	// mu guards: cfg, workers, usedKeys, and serialises reloads with
	// control changes.
	cfg     *config.Config
	workers map[*xfrmif.Interface]*datapath.Workers
	// usedKeys holds every key of every SA a config file brought up or
	// `state add` installed, as a digest, with the SA that had it (see
	// buildStates and backend.AddState).
	usedKeys config.KeyOwners

	// newSA makes the SAs of buildStates and AddState; nil means sa.New.
	// Tests set it to see the SAs that were made.
	newSA func(sa.Config, *sa.Counters) (*sa.SA, error)
}

// makeSA makes an SA that shares the node's counters, resumed from its
// key's record in the state directory (an outbound SA continues above its
// last reservation, an inbound one refuses the previous run's packets).
// Without a state directory, AES-GCM and ChaCha20-Poly1305 are refused
// (seqstate.Without). The caller owns the SA until it joins the SAD: an
// SA that does not join must be Discarded, so that its copies of the keys
// are zeroed. A node that never called openState (a unit test's) keeps no
// state: startNode always calls it.
func (n *node) makeSA(c sa.Config) (*sa.SA, error) {
	if n.seq == nil && n.seqErr != nil {
		if err := seqstate.Without(&c, n.stateDir, n.seqErr); err != nil {
			return nil, err
		}
	}
	newSA := sa.New
	if n.newSA != nil {
		newSA = n.newSA
	}
	s, err := newSA(c, n.counters)
	if err != nil || n.seq == nil {
		return s, err
	}
	if err := n.seq.Attach(s); err != nil {
		s.Discard()
		return nil, err
	}
	return s, nil
}

// openState opens the state directory, once, at start. When it cannot
// be used, the node runs on: makeSA refuses the SAs that need it and the
// others run with this warning.
func (n *node) openState(dir string) {
	n.stateDir = dir
	n.seq, n.seqErr = seqstate.Open(dir)
	if n.seqErr != nil {
		n.log.WithError(n.seqErr).Warn("state_dir cannot be used: SAs with AES-GCM or ChaCha20-Poly1305 keys are refused; " +
			"CBC and NULL SAs run, but after a restart their sequence numbers start again at 1 and their replay windows forget the old packets")
		return
	}
	n.seqDone = make(chan struct{})
	go n.routineSaveTops()
}

// routineSaveTops saves the inbound SAs' replay-window tops every
// seqstate.SaveInterval, off the packet path, until the node stops.
func (n *node) routineSaveTops() {
	defer close(n.seqDone)
	n.seq.RoutineSaveTops(n.ctx, n.log.WithField("part", "state").Warnf)
}

// startNode brings a config up. On failure it removes what it made.
func startNode(cfg *config.Config, log *logrus.Logger) (n *node, err error) {
	n = &node{
		log:      log,
		counters: &sa.Counters{},
		reg:      &xfrmif.Registry{},
		cfg:      cfg,
		workers:  map[*xfrmif.Interface]*datapath.Workers{},
		underlay: cfg.Underlay,
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.sad = sa.NewSAD(n.counters)
	n.sad.SetEventHandler(n.onEvent)
	n.openState(cfg.StateDir)
	var states []*sa.SA
	defer func() {
		if err != nil {
			n.stop()
			// Zero the SAs' keys: emptying the SAD retires those that
			// joined it, Discard those that did not (both idempotent).
			// cfg's own keys are the caller's (runDaemon wipes them).
			n.sad.Replace(nil, nil)
			for _, s := range states {
				s.Discard()
			}
		}
	}()

	states, err = n.buildStates(cfg, nil)
	if err != nil {
		return n, err
	}
	if err := n.sad.Replace(states, cfg.Policies); err != nil {
		return n, fmt.Errorf("%s: %w", cfg.File, err)
	}
	n.rememberKeys(states)

	n.conn, err = underlay.Open(underlay.Config{
		UDP:    cfg.Underlay.UDP,
		RawESP: cfg.Underlay.RawESP,
		Mark:   cfg.Underlay.Mark,
	}, log.WithField("part", "underlay").Debugf)
	if err != nil {
		return n, err
	}
	n.engine = datapath.New(n.sad, n.reg, n.conn, log.WithField("part", "datapath"))

	// Guards before interfaces: a prefix is guarded before it is routed,
	// and one a crashed run left stays guarded throughout.
	n.guards, err = openGuards(cfg, log.WithField("part", "fail-closed"))
	if err != nil {
		return n, err
	}

	start := time.Now()
	res, err := n.reg.Sync(interfaceConfigs(cfg))
	if err != nil {
		return n, err
	}
	n.startWorkers(res.Added)
	log.WithField("took", time.Since(start).Round(time.Millisecond)).Infof("%d interfaces up", n.reg.Len())
	// Inbound work spreads over as many workers as the widest interface
	// has queues; more than there are CPUs gains nothing.
	queues := 1
	for _, c := range cfg.Interfaces {
		queues = max(queues, c.Queues)
	}
	n.engine.SetInboundWorkers(min(queues, runtime.GOMAXPROCS(0)))
	n.engine.Start(n.ctx)

	n.ctl, err = control.Listen(cfg.Control, (*backend)(n), log.WithField("part", "control"))
	if err != nil {
		return n, err
	}
	go n.ctl.Serve()

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

	go n.tick()
	n.started = true
	return n, nil
}

// buildStates makes the config's SAs, at start-up (old nil) or on a
// reload (old the running SAs). A running SA that the file names again
// (same direction, SPI and destination) with the same config, keys
// included, is kept as it is, so that a reload does not reset its
// sequence number, replay window or counters. One that the file names
// with another config refuses the file (see changedState), and so does a
// new SA with a key that any SA, of either direction, had before
// (n.usedKeys): it would start its sequence numbers again at 1, and the
// AEADs take their nonces from them (RFC 4106 §3.1: never repeated under
// one key); an inbound one would accept the old SA's packets again.
//
// The SAs come back oldest first: the kept ones in the order they were
// added, then the new ones in file order. The SAD seals with the newest of
// the outbound SAs that cover a packet, so an outbound SA that a reload
// adds takes over from a running one wherever the file lists it
// (make-before-break), and a reload that adds nothing changes no choice.
//
// On error it returns no SAs, and those it made are Discarded (their keys
// zeroed); the running ones are left as they are. On success the new SAs
// are the caller's: they must join the SAD or be Discarded (discardNew).
func (n *node) buildStates(cfg *config.Config, old []*sa.SA) (_ []*sa.SA, err error) {
	type id struct {
		dir sa.Dir
		spi uint32
		dst netip.Addr
	}
	keep := make(map[id]*sa.SA, len(old))
	for _, s := range old {
		keep[id{s.Dir(), s.SPI(), s.Dst()}] = s
	}
	var errs config.ErrorList
	states := make([]*sa.SA, 0, len(cfg.States))
	defer func() {
		if err != nil {
			discardNew(states, old)
		}
	}()
	for i, st := range cfg.States {
		if s := keep[id{st.Dir, st.SPI, st.Dst}]; s != nil {
			run := s.Config()
			field, msg := changedState(run, st.Config)
			run.ClearKeys()
			if field != "" {
				errs = append(errs, &config.Error{File: cfg.File, Line: st.Line, Field: fmt.Sprintf("states[%d].%s", i, field), Msg: msg})
				continue
			}
			states = append(states, s)
			continue
		}
		if st.Encap == nil && !n.rawESP() {
			// The file may turn raw_esp on, but the running underlay
			// keeps the sockets it opened at start.
			errs = append(errs, &config.Error{File: cfg.File, Line: st.Line, Field: fmt.Sprintf("states[%d].encap", i),
				Msg: "missing, and the running underlay has no raw ESP socket (underlay.raw_esp was off at start, and underlay " +
					"changes take effect on restart): the SA's traffic would be dropped; add encap: {type: espinudp}, or restart"})
			continue
		}
		if f, prev, used := n.usedKeys.Conflict(&st.Config); used {
			errs = append(errs, &config.Error{File: cfg.File, Line: st.Line, Field: fmt.Sprintf("states[%d].%s", i, f),
				Msg: fmt.Sprintf("%s: this key was already used by an earlier SA (%s), and a second SA with it, of either direction, "+
					"would start its sequence numbers again at 1, which AES-GCM and ChaCha20-Poly1305 take as nonces "+
					"(an inbound SA would accept the old packets again): give the new SA a new key", "SA "+saID(st.Dir, st.SPI, st.Dst), prev)})
			continue
		}
		s, err := n.makeSA(st.Config)
		if err != nil {
			errs = append(errs, &config.Error{File: cfg.File, Line: st.Line, Field: fmt.Sprintf("states[%d]", i), Msg: err.Error()})
			continue
		}
		states = append(states, s)
	}
	if len(errs) != 0 {
		return nil, errs
	}
	// Stable: SAs made in this call may share a clock reading.
	slices.SortStableFunc(states, func(a, b *sa.SA) int { return a.Added().Compare(b.Added()) })
	return states, nil
}

// changedState compares a running SA's config with the file's state of
// the same direction, SPI and destination. It returns "" when they are
// the same SA, else the first field that differs (named as in the file)
// and why the file is refused. A running SA is never replaced in place: a
// new SA under its SPI would start again at sequence number 1, which the
// peer's replay window drops (outbound), or forget the packets it has seen
// and let replays in (inbound); and a new key under a running SPI makes
// the peer drop what is in flight, as no one can tell which key sealed a
// packet. The message never holds key material.
func changedState(run, file sa.Config) (field, msg string) {
	name := fmt.Sprintf("SA spi 0x%08x dir %s dst %s", run.SPI, run.Dir, run.Dst)
	for _, alg := range []struct {
		field, bits string
		run, file   *sa.Algorithm
	}{{"aead", "icv_bits", run.AEAD, file.AEAD}, {"enc", "", run.Enc, file.Enc}, {"auth", "trunc_bits", run.Auth, file.Auth}} {
		switch {
		case (alg.run == nil) != (alg.file == nil):
			field = alg.field
		case alg.run == nil:
			continue
		case alg.run.Name != alg.file.Name:
			field = alg.field + ".name"
		case alg.run.Bits != alg.file.Bits:
			field = alg.field + "." + alg.bits
		case !bytes.Equal(alg.run.Key, alg.file.Key):
			return alg.field + ".key", name + " is running with another key, and a running SA is not rekeyed in place " +
				"(the peer would drop the packets in flight, and the sequence number would start again at 1): " +
				"put the new key under a new SPI, and remove this state once the peer uses the new one (make-before-break)"
		default:
			continue
		}
		return field, name + " is running with another algorithm, and a running SA does not change in place: " +
			"put the new algorithm under a new SPI, and remove this state once the peer uses the new one (make-before-break)"
	}
	switch {
	case run.Src != file.Src:
		field = "src"
	case run.Mode != file.Mode:
		field = "mode"
	case run.IfID != file.IfID:
		field = "if_id"
	case !reflect.DeepEqual(run.Encap, file.Encap):
		field = "encap"
	case run.ReplayWindow != file.ReplayWindow:
		field = "replay_window"
	case run.ESN != file.ESN:
		field = "esn"
	case run.Lifetime != file.Lifetime:
		field = "lifetime"
	case !reflect.DeepEqual(run.Selector, file.Selector):
		field = "selector"
	case !reflect.DeepEqual(run, file):
		field = "" // a field this function does not know: name the state
	default:
		return "", ""
	}
	what := "another " + field
	if field == "" {
		what = "another config"
	}
	msg = name + " is running with " + what + ", and a running SA does not change in place " +
		"(a new SA would start its sequence number and replay window again): put the change under a new SPI, " +
		"and remove this state once the peer uses the new one (make-before-break)"
	if field == "" {
		field = "spi"
	}
	return field, msg
}

// rememberKeys records the keys of states, just installed, in
// n.usedKeys. Called with n.mu held, or before the node is shared.
func (n *node) rememberKeys(states []*sa.SA) {
	if n.usedKeys == nil {
		n.usedKeys = config.KeyOwners{}
	}
	for _, s := range states {
		c := s.Config()
		n.usedKeys.Add(&c, saID(s.Dir(), s.SPI(), s.Dst()))
		c.ClearKeys()
	}
}

// rawESP reports whether the running underlay has raw ESP sockets, as
// the config the node started with asked (underlay changes wait for a
// restart).
func (n *node) rawESP() bool { return n.underlay.RawESP }

// saID names an SA in messages as ip xfrm would find it.
func saID(dir sa.Dir, spi uint32, dst netip.Addr) string {
	return fmt.Sprintf("spi 0x%08x dir %s dst %s", spi, dir, dst)
}

// discardNew zeroes the keys of the SAs of states that are not among the
// running ones (old): those made for a reload that was refused. The
// running SAs stay as they are.
func discardNew(states, old []*sa.SA) {
	running := make(map[*sa.SA]bool, len(old))
	for _, s := range old {
		running[s] = true
	}
	for _, s := range states {
		if !running[s] {
			s.Discard()
		}
	}
}

func interfaceConfigs(cfg *config.Config) []xfrmif.Config {
	out := make([]xfrmif.Config, len(cfg.Interfaces))
	for i, c := range cfg.Interfaces {
		out[i] = xfrmif.Config{Name: c.Name, IfID: c.IfID, MTU: c.MTU, Addresses: c.Addresses, Routes: c.Routes, Queues: c.Queues, Table: c.Table}
	}
	return out
}

// startWorkers starts the sending workers of the named interfaces that
// have none yet.
func (n *node) startWorkers(names []string) {
	want := make(map[string]bool, len(names))
	for _, name := range names {
		want[name] = true
	}
	for _, ifc := range n.reg.All() {
		if want[ifc.Name()] && n.workers[ifc] == nil {
			n.workers[ifc] = n.engine.StartInterface(n.ctx, ifc)
		}
	}
}

// reload applies the config file at path. A file that does not parse, or
// whose SAs or interfaces cannot be made, is refused whole and the running
// config stays. SAs unchanged in the file keep their state; SAs added over
// the control socket and absent from the file are removed, as the file
// is the whole configuration.
func (n *node) reload(path string) {
	cfg, err := config.Load(path) // on error, Load has zeroed what it decoded
	if err != nil {
		n.log.WithField("config", path).Errorf("reload refused, the running config stays:\n%v", err)
		return
	}
	n.apply(cfg)
}

// apply makes cfg, just loaded, the running config, or refuses it; it
// reports whether cfg was applied. Once applied, cfg is n.cfg and the
// previous config's keys are the caller's to zero (runDaemon does). When
// refused, the SAs made for cfg are Discarded and cfg's keys zeroed here:
// nothing of it will be used. The running config and SAs are never wiped.
func (n *node) apply(cfg *config.Config) (applied bool) {
	log := n.log.WithField("config", cfg.File)
	n.mu.Lock()
	defer n.mu.Unlock()
	var states, old []*sa.SA
	defer func() {
		if !applied {
			discardNew(states, old)
			if cfg != n.cfg {
				cfg.WipeKeys()
			}
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
	old = n.sad.States()
	states, err := n.buildStates(cfg, old)
	if err != nil {
		log.Errorf("reload refused, the running config stays:\n%v", err)
		return false
	}
	// Guards of new routes before the routes; those of removed ones
	// go after them (syncGuards).
	if err := n.guards.ensure(wantGuards(cfg, n.reg)); err != nil {
		log.WithError(err).Error("reload: fail-closed guards")
	}
	// Interfaces first, so that SAs of new interfaces have somewhere
	// to deliver; then the SAD, new SAs in before old ones go
	// (make-before-break happens in one table swap).
	res, err := n.reg.Sync(interfaceConfigs(cfg))
	if err != nil && len(res.Added)+len(res.Removed)+len(res.Reconfigured)+len(res.Replaced)+len(res.Unchanged) == 0 {
		log.WithError(err).Error("reload refused, the running config stays")
		return false
	}
	if err != nil {
		log.WithError(err).Error("reload: some interfaces failed")
	}
	n.reapWorkers()
	n.startWorkers(append(res.Added, res.Replaced...))
	if err := n.sad.Replace(states, cfg.Policies); err != nil {
		// Replace changes nothing when it fails: the running SAs stay.
		log.WithError(err).Error("reload: SAD")
		return false
	}
	n.rememberKeys(states)
	n.cfg = cfg
	// The file is checked, so its log section is valid: apply it last,
	// so that a refused reload changes nothing.
	if err := configureLog(n.log, cfg.Log); err != nil {
		log.WithError(err).Error("reload: log")
	}
	syncGuards()
	log.WithFields(logrus.Fields{
		"added": len(res.Added), "removed": len(res.Removed), "reconfigured": len(res.Reconfigured), "replaced": len(res.Replaced),
	}).Info("reloaded: " + cfg.Summary())
	return true
}

// reapWorkers stops the workers of interfaces no longer registered, and
// restarts those of interfaces whose MTU outgrew their buffers.
func (n *node) reapWorkers() {
	live := map[*xfrmif.Interface]bool{}
	for _, ifc := range n.reg.All() {
		live[ifc] = true
	}
	for ifc, w := range n.workers {
		switch {
		case !live[ifc]:
			w.Stop()
			delete(n.workers, ifc)
		case ifc.MTU() > w.MTU:
			w.Stop()
			n.workers[ifc] = n.engine.StartInterface(n.ctx, ifc)
		}
	}
}

// tick runs the add-time lifetimes once a second, and logs lifetime
// events and removes hard-expired SAs as soon as onEvent hands them over
// (at the latest on the next second, should an event be lost).
func (n *node) tick() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	wake := n.expiry.wakeup()
	for {
		select {
		case <-n.ctx.Done():
			return
		case now := <-t.C:
			n.sad.Tick(now)
		case <-wake:
		}
		n.logExpiries()
		n.reapExpired()
	}
}

// onEvent receives SA lifetime events. It runs on the data path, so it
// only queues the event for tick, which logs it and, for a hard expiry,
// removes the SA.
func (n *node) onEvent(ev sa.Event) {
	n.expiry.push(ev)
}

// stop removes the interfaces and closes the sockets, then removes the
// fail-closed guards unless the config keeps them. It waits for the
// workers for a few seconds at most.
func (n *node) stop() error {
	n.cancel()
	var errs []error
	if n.ctl != nil {
		errs = append(errs, n.ctl.Close())
	}
	if n.metrics != nil {
		errs = append(errs, n.metrics.Close())
	}
	if n.conn != nil {
		errs = append(errs, n.conn.Close())
	}
	errs = append(errs, n.reg.Close())
	// Guards last: they cover the prefixes until the routes are gone.
	keep := false
	if cfg := n.runningConfig(); cfg != nil { // nil in tests' hand-made nodes
		keep = cfg.FailClosed.KeepOnStop
	}
	errs = append(errs, n.guards.close(keep, !n.started))
	if n.engine != nil {
		done := make(chan struct{})
		go func() { n.engine.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			errs = append(errs, errors.New("workers did not stop within 5 s"))
		}
	}
	if n.seqDone != nil {
		// The final tops, once the workers have stopped opening.
		<-n.seqDone
		n.seq.Flush(n.log.WithField("part", "state").Warnf)
		n.seq.Close()
		n.seqDone = nil // stop may run twice
	}
	return errors.Join(errs...)
}

// runningConfig returns the config the node runs.
func (n *node) runningConfig() *config.Config {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cfg
}

// wipeKeys empties the SAD, which zeroes every SA's keys once no worker
// uses them (sa/retire.go), and zeroes the running config's keys. The
// daemon calls it when it stops.
func (n *node) wipeKeys() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.sad.Replace(nil, nil); err != nil {
		n.log.WithError(err).Warn("stopping: emptying the SAD")
	}
	n.cfg.WipeKeys()
}
