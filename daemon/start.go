package daemon

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/control"
	ipnode "github.com/ipsecd/ipsecd/node"
	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/underlay"
	"github.com/ipsecd/ipsecd/xfrmif"
)

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
	if n.routes, err = openRoadRoutes(cfg, n.reg, n.guards, log.WithField("part", "routes")); err != nil {
		return n, err
	}

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
