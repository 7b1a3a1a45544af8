package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"runtime"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/datapath"
	"github.com/ipsecd/ipsecd/sa"
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
	conn     *underlay.Conn
	engine   *datapath.Engine
	ctl      *control.Server
	metrics  *http.Server

	ctx    context.Context
	cancel context.CancelFunc

	mu sync.Mutex
	// mu guards: cfg, workers, and serialises reloads with control
	// changes.
	cfg     *config.Config
	workers map[*xfrmif.Interface]*datapath.Workers
}

// startNode brings a config up. On failure it removes what it made.
func startNode(cfg *config.Config, log *logrus.Logger) (n *node, err error) {
	n = &node{
		log:      log,
		counters: &sa.Counters{},
		reg:      &xfrmif.Registry{},
		cfg:      cfg,
		workers:  map[*xfrmif.Interface]*datapath.Workers{},
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			n.stop()
		}
	}()
	n.sad = sa.NewSAD(n.counters)
	n.sad.SetEventHandler(n.onEvent)

	states, err := n.buildStates(cfg, nil)
	if err != nil {
		return n, err
	}
	if err := n.sad.Replace(states, cfg.Policies); err != nil {
		return n, fmt.Errorf("%s: %w", cfg.File, err)
	}

	n.conn, err = underlay.Open(underlay.Config{
		UDP:    cfg.Underlay.UDP,
		RawESP: cfg.Underlay.RawESP,
		Mark:   cfg.Underlay.Mark,
	}, log.WithField("part", "underlay").Debugf)
	if err != nil {
		return n, err
	}
	n.engine = datapath.New(n.sad, n.reg, n.conn, log.WithField("part", "datapath"))

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
		n.metrics = &http.Server{Handler: metricsHandler(n), ReadHeaderTimeout: 5 * time.Second}
		go n.metrics.Serve(ln)
	}

	go n.tick()
	return n, nil
}

// buildStates makes the config's SAs. An SA of old whose config is the
// same (keys included) is kept as it is, so that a reload does not reset
// its sequence number, replay window or counters.
func (n *node) buildStates(cfg *config.Config, old []*sa.SA) ([]*sa.SA, error) {
	type id struct {
		dir sa.Dir
		spi uint32
		dst string
	}
	keep := make(map[id]*sa.SA, len(old))
	for _, s := range old {
		keep[id{s.Dir(), s.SPI(), s.Dst().String()}] = s
	}
	var errs config.ErrorList
	states := make([]*sa.SA, 0, len(cfg.States))
	for i, st := range cfg.States {
		if s := keep[id{st.Dir, st.SPI, st.Dst.String()}]; s != nil && reflect.DeepEqual(s.Config(), st.Config) {
			states = append(states, s)
			continue
		}
		s, err := sa.New(st.Config, n.counters)
		if err != nil {
			errs = append(errs, &config.Error{File: cfg.File, Line: st.Line, Field: fmt.Sprintf("states[%d]", i), Msg: err.Error()})
			continue
		}
		states = append(states, s)
	}
	if len(errs) != 0 {
		return nil, errs
	}
	return states, nil
}

func interfaceConfigs(cfg *config.Config) []xfrmif.Config {
	out := make([]xfrmif.Config, len(cfg.Interfaces))
	for i, c := range cfg.Interfaces {
		out[i] = xfrmif.Config{Name: c.Name, IfID: c.IfID, MTU: c.MTU, Addresses: c.Addresses, Routes: c.Routes, Queues: c.Queues}
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
	log := n.log.WithField("config", path)
	cfg, err := config.Load(path)
	if err != nil {
		log.Errorf("reload refused, the running config stays:\n%v", err)
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if cfg.Underlay != n.cfg.Underlay {
		log.Warn("reload: underlay changes take effect on restart")
	}
	if cfg.Control != n.cfg.Control || cfg.Metrics != n.cfg.Metrics {
		log.Warn("reload: control and metrics changes take effect on restart")
	}
	states, err := n.buildStates(cfg, n.sad.States())
	if err != nil {
		log.Errorf("reload refused, the running config stays:\n%v", err)
		return
	}
	// Interfaces first, so that SAs of new interfaces have somewhere
	// to deliver; then the SAD, new SAs in before old ones go
	// (make-before-break happens in one table swap).
	res, err := n.reg.Sync(interfaceConfigs(cfg))
	if err != nil && len(res.Added)+len(res.Removed)+len(res.Reconfigured)+len(res.Replaced)+len(res.Unchanged) == 0 {
		log.WithError(err).Error("reload refused, the running config stays")
		return
	}
	if err != nil {
		log.WithError(err).Error("reload: some interfaces failed")
	}
	n.reapWorkers()
	n.startWorkers(append(res.Added, res.Replaced...))
	if err := n.sad.Replace(states, cfg.Policies); err != nil {
		log.WithError(err).Error("reload: SAD")
		return
	}
	n.cfg = cfg
	// The file is checked, so its log section is valid: apply it last,
	// so that a refused reload changes nothing.
	if err := configureLog(n.log, cfg.Log); err != nil {
		log.WithError(err).Error("reload: log")
	}
	log.WithFields(logrus.Fields{
		"added": len(res.Added), "removed": len(res.Removed), "reconfigured": len(res.Reconfigured), "replaced": len(res.Replaced),
	}).Info("reloaded: " + cfg.Summary())
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

// tick runs the add-time lifetimes once a second.
func (n *node) tick() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case now := <-t.C:
			n.sad.Tick(now)
		}
	}
}

// onEvent logs SA lifetime events. It runs on the data path: it must not
// block.
func (n *node) onEvent(ev sa.Event) {
	kind := "soft"
	if ev.Kind == sa.HardExpire {
		kind = "hard"
	}
	n.log.WithFields(logrus.Fields{"sa": ev.SA.String(), "reason": ev.Reason}).Warnf("SA %s lifetime expired", kind)
}

// stop removes the interfaces and closes the sockets. It waits for the
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
	if n.engine != nil {
		done := make(chan struct{})
		go func() { n.engine.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			errs = append(errs, errors.New("workers did not stop within 5 s"))
		}
	}
	return errors.Join(errs...)
}
