package daemon

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"runtime/debug"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/eapradius"
	"github.com/ipsecd/ipsecd/ikenode"
	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/xfrmif"
)

// The metrics. Their names and the labels counter, spi, dir and name are
// a contract with whoever scrapes them (dashboards, alerts): rename none.
// An SA is named by spi, dir and dst together, as the SAD keys it: two SAs
// may share an SPI in different directions or for different destinations.
// No metric carries key material.
var (
	saLabels = []string{"spi", "dir", "dst"}

	descXfrmStat = prometheus.NewDesc("ipsecd_xfrm_stat_total",
		"Global xfrm counters, named as /proc/net/xfrm_stat, followed by the underlay's own (IpsecdUnderlay*) as `ipsecd stats` prints them.",
		[]string{"counter"}, nil)

	descSABytes = prometheus.NewDesc("ipsecd_sa_bytes_total",
		"Bytes sealed (dir=out) or opened (dir=in) by an SA.", saLabels, nil)
	descSAPackets = prometheus.NewDesc("ipsecd_sa_packets_total",
		"Packets sealed (dir=out) or opened (dir=in) by an SA.", saLabels, nil)
	descSAErrors = prometheus.NewDesc("ipsecd_sa_errors_total",
		"Packets an inbound SA dropped, as `ip -s xfrm state` counts them: kind=replay_window (left of the window), replay (seen before), integrity_failed (ICV did not verify).",
		append(saLabels[:len(saLabels):len(saLabels)], "kind"), nil)
	descSAExpired = prometheus.NewDesc("ipsecd_sa_expired",
		"1 once an SA reached its soft (kind=soft: time to rekey) or hard (kind=hard: it no longer seals or opens) lifetime, else 0.",
		append(saLabels[:len(saLabels):len(saLabels)], "kind"), nil)

	ifLabels             = []string{"name", "dir"}
	descInterfacePackets = prometheus.NewDesc("ipsecd_interface_packets_total",
		"Packets through an xfrm interface: rx out of it to the host (opened ESP), tx from the host into it (to be sealed).", ifLabels, nil)
	descInterfaceBytes = prometheus.NewDesc("ipsecd_interface_bytes_total",
		"Bytes through an xfrm interface (rx and tx as for ipsecd_interface_packets_total).", ifLabels, nil)
	descInterfaceErrors = prometheus.NewDesc("ipsecd_interface_errors_total",
		"Errors on an xfrm interface: failed reads and writes of its device, underlay send failures.", ifLabels, nil)
	descInterfaceDrops = prometheus.NewDesc("ipsecd_interface_drops_total",
		"Packets an xfrm interface dropped: tx without policy or SA, blocked or failed to seal; rx refused by the inner policy check or after close.", ifLabels, nil)
	descQueuePackets = prometheus.NewDesc("ipsecd_interface_queue_packets_total",
		"Packets through one queue of an xfrm interface (rx written through it, tx read by its worker): the spread of flows over queues. Summed over queue, it is ipsecd_interface_packets_total.",
		[]string{"name", "queue", "dir"}, nil)

	descIKESAs = prometheus.NewDesc("ipsecd_ike_sas",
		"IKE SAs by state: CONNECTING (IKE_SA_INIT or IKE_AUTH under way), ESTABLISHED, REKEYED (replaced, its delete under way), DELETING.",
		[]string{"state"}, nil)
	descIKEChildSAs = prometheus.NewDesc("ipsecd_ike_child_sas",
		"CHILD_SA pairs negotiated by IKE and installed.", nil, nil)
	descIKEExchanges = prometheus.NewDesc("ipsecd_ike_exchanges_total",
		"IKE messages handled, the peer's requests and the responses to ours, by exchange (IKE_SA_INIT, IKE_AUTH, CREATE_CHILD_SA, INFORMATIONAL, other) and result: ok, dropped (malformed, replayed, out of window, not authentic), failed (the exchange failed: refused, authentication failed).",
		[]string{"exchange", "result"}, nil)
	descIKERetransmissions = prometheus.NewDesc("ipsecd_ike_retransmissions_total",
		"IKE requests of ours sent again for want of an answer.", nil, nil)
	descIKEAuthFailures = prometheus.NewDesc("ipsecd_ike_auth_failures_total",
		"IKE_AUTH exchanges that failed authentication (a wrong PSK or certificate, either side's verdict).", nil, nil)
	descIKEDropped = prometheus.NewDesc("ipsecd_ike_dropped_total",
		"IKE datagrams dropped before any SA handled them, by reason: malformed, no_sa (for an SA that is gone), no_connection (no connection admits the addresses), cookie (answered with a cookie under load), block_threshold (an IKE_SA_INIT from an address with ike.block_threshold half-open IKE SAs), init_limit_half_open (an IKE_SA_INIT while ike.init_limit_half_open are half-open), queue_full; send_error counts datagrams the kernel refused to send.",
		[]string{"reason"}, nil)

	descIKEEAP = prometheus.NewDesc("ipsecd_ike_eap_total",
		"Road warriors' EAP logins at the gateway by method (EAP-MSCHAPv2, EAP-MD5, EAP-TLS) and result: succeeded, failed (a wrong password, an unknown user, a method refused, an Access-Reject; ipsecd_ike_eap_failures_total says why).",
		[]string{"method", "result"}, nil)
	descIKEEAPFailures = prometheus.NewDesc("ipsecd_ike_eap_failures_total",
		"EAP logins that failed, by reason: unknown_user, wrong_password, method_refused, tls (the gateway's own check), rejected (ours, as a client, refused by the gateway), radius_reject (an Access-Reject), radius_timeout (no RADIUS server answered), radius_bad_authenticator (RADIUS answers failed their authenticators: a wrong shared secret), radius_malformed, protocol (the client's EAP broke the method), other.",
		[]string{"reason"}, nil)
	descIKEUnique = prometheus.NewDesc("ipsecd_ike_unique_total",
		"A connection's unique at work, by action: refused (a new IKE SA whose identity held one, unique: keep), replaced (an old IKE SA a new one of its identity replaced, unique: replace).",
		[]string{"action"}, nil)
	descPoolAddresses = prometheus.NewDesc("ipsecd_pool_addresses",
		"Addresses of a virtual IP pool by state: online (leased to a client that is connected), offline (kept for a client that left, until the pool needs it), free (never handed out, or free again).",
		[]string{"pool", "state"}, nil)

	descBuildInfo = prometheus.NewDesc("ipsecd_build_info",
		"Always 1; the labels say which build of ipsecd runs (from the Go build information).",
		[]string{"version", "revision", "goversion"}, nil)
)

// metricsSource is what the collector reads at scrape time. Each function
// is called once per scrape and must be safe for concurrent use.
type metricsSource struct {
	// counters returns the global counters as `ipsecd stats` prints them.
	counters   func() []control.Counter
	states     func() []*sa.SA
	interfaces func() []*xfrmif.Interface
	// ike returns the IKE daemon's SAs and counters, false when it does
	// not run.
	ike func() ([]control.IKESAInfo, ikenode.Counters, bool)
	// pools returns the address pools, none when there are none.
	pools func() []control.PoolInfo
	// radius returns the RADIUS servers' counters (radius.go), none
	// without eap_radius.
	radius func() []eapradius.ServerStats
}

// nodeMetricsSource reads n's SAD, interfaces and counters.
func nodeMetricsSource(n *Daemon) metricsSource {
	return metricsSource{
		counters:   (*backend)(n).Stats,
		states:     n.sad.States,
		interfaces: n.reg.All,
		ike: func() ([]control.IKESAInfo, ikenode.Counters, bool) {
			m := n.ike.running()
			if m == nil {
				return nil, ikenode.Counters{}, false
			}
			sas, err := m.List()
			return sas, m.Counters(), err == nil
		},
		pools: func() []control.PoolInfo {
			if set := n.pools.pools(); set != nil {
				return poolInfos(set, false)
			}
			return nil
		},
		radius: n.radius.stats,
	}
}

// nodeCollector is a prometheus.Collector that reads the node's counters
// when scraped. The data path keeps its own atomic counters and pays
// nothing for metrics; SAs and interfaces are found anew on every scrape,
// so a rekey or reload registers and unregisters nothing. Safe for
// concurrent use.
type nodeCollector struct {
	src       metricsSource
	buildInfo prometheus.Metric
}

var _ prometheus.Collector = (*nodeCollector)(nil)

func newNodeCollector(src metricsSource) *nodeCollector {
	version, revision, goversion := buildInfo()
	return &nodeCollector{
		src:       src,
		buildInfo: prometheus.MustNewConstMetric(descBuildInfo, prometheus.GaugeValue, 1, version, revision, goversion),
	}
}

// buildInfo returns the main module's version ("(devel)" or a
// VCS-derived pseudo-version for a build in a checkout), the VCS revision
// the binary was built from, and the Go version; "unknown" for what the
// binary does not record (go test, -buildvcs=false).
func buildInfo() (version, revision, goversion string) {
	version, revision, goversion = "unknown", "unknown", runtime.Version()
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return version, revision, goversion
	}
	if bi.Main.Version != "" {
		version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		goversion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && s.Value != "" {
			revision = s.Value
		}
	}
	return version, revision, goversion
}

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		descXfrmStat,
		descSABytes, descSAPackets, descSAErrors, descSAExpired,
		descInterfacePackets, descInterfaceBytes, descInterfaceErrors, descInterfaceDrops, descQueuePackets,
		descBuildInfo,
		descIKESAs, descIKEChildSAs, descIKEExchanges, descIKERetransmissions, descIKEAuthFailures, descIKEDropped,
		descIKEEAP, descIKEEAPFailures, descIKEUnique, descPoolAddresses, descRADIUS,
	} {
		ch <- d
	}
}

func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- c.buildInfo
	for _, ctr := range c.src.counters() {
		emit(ch, descXfrmStat, prometheus.CounterValue, ctr.Value, ctr.Name)
	}
	for _, s := range c.src.states() {
		collectSA(ch, s)
	}
	for _, ifc := range c.src.interfaces() {
		collectInterface(ch, ifc)
	}
	if c.src.ike != nil {
		if sas, ctr, ok := c.src.ike(); ok {
			collectIKE(ch, sas, ctr)
		}
	}
	if c.src.pools != nil {
		for _, p := range c.src.pools() {
			emit(ch, descPoolAddresses, prometheus.GaugeValue, uint64(p.Online), p.Name, "online")
			emit(ch, descPoolAddresses, prometheus.GaugeValue, uint64(p.Offline), p.Name, "offline")
			emit(ch, descPoolAddresses, prometheus.GaugeValue, uint64(max(0, int64(p.Size)-int64(p.Online)-int64(p.Offline))), p.Name, "free")
		}
	}
	if c.src.radius != nil {
		collectRADIUS(ch, c.src.radius())
	}
}

// ikeStates are the states ipsecd_ike_sas always reports, 0 included,
// so that a dashboard sees a state go to zero rather than vanish.
var ikeStates = []string{"CONNECTING", "ESTABLISHED", "REKEYED", "DELETING"}

func collectIKE(ch chan<- prometheus.Metric, sas []control.IKESAInfo, ctr ikenode.Counters) {
	byState := map[string]uint64{}
	var children uint64
	for _, s := range sas {
		byState[s.State]++
		children += uint64(len(s.Children))
	}
	for _, st := range ikeStates {
		emit(ch, descIKESAs, prometheus.GaugeValue, byState[st], st)
	}
	emit(ch, descIKEChildSAs, prometheus.GaugeValue, children)
	for ex, results := range ctr.Exchanges {
		for r, v := range results {
			emit(ch, descIKEExchanges, prometheus.CounterValue, v, ex, ikenode.ResultNames[r])
		}
	}
	emit(ch, descIKERetransmissions, prometheus.CounterValue, ctr.Retransmits)
	emit(ch, descIKEAuthFailures, prometheus.CounterValue, ctr.AuthFailures)
	for _, d := range []struct {
		reason string
		v      uint64
	}{{"malformed", ctr.Malformed}, {"no_sa", ctr.NoSA}, {"no_connection", ctr.NoConnection}, {"cookie", ctr.Cookies},
		{"block_threshold", ctr.Blocked}, {"init_limit_half_open", ctr.HalfOpenFull},
		{"queue_full", ctr.QueueDrops}, {"send_error", ctr.SendErrors}} {
		emit(ch, descIKEDropped, prometheus.CounterValue, d.v, d.reason)
	}
	for method, v := range ctr.EAP {
		emit(ch, descIKEEAP, prometheus.CounterValue, v[0], method, "succeeded")
		emit(ch, descIKEEAP, prometheus.CounterValue, v[1], method, "failed")
	}
	for reason, v := range ctr.EAPFailures {
		emit(ch, descIKEEAPFailures, prometheus.CounterValue, v, reason)
	}
	emit(ch, descIKEUnique, prometheus.CounterValue, ctr.UniqueRefused, "refused")
	emit(ch, descIKEUnique, prometheus.CounterValue, ctr.UniqueReplaced, "replaced")
}

// collectSA reads one snapshot of s's counters for all of its metrics.
func collectSA(ch chan<- prometheus.Metric, s *sa.SA) {
	st := s.Stats()
	spi := control.FormatSPI(s.SPI())
	dir, dst := s.Dir().String(), s.Dst().String()
	emit(ch, descSABytes, prometheus.CounterValue, st.Bytes, spi, dir, dst)
	emit(ch, descSAPackets, prometheus.CounterValue, st.Packets, spi, dir, dst)
	emit(ch, descSAErrors, prometheus.CounterValue, st.ReplayWindow, spi, dir, dst, "replay_window")
	emit(ch, descSAErrors, prometheus.CounterValue, st.Replay, spi, dir, dst, "replay")
	emit(ch, descSAErrors, prometheus.CounterValue, st.IntegrityFailed, spi, dir, dst, "integrity_failed")
	emit(ch, descSAExpired, prometheus.GaugeValue, boolValue(st.SoftExpired), spi, dir, dst, "soft")
	emit(ch, descSAExpired, prometheus.GaugeValue, boolValue(st.HardExpired), spi, dir, dst, "hard")
}

// collectInterface reads each queue's counters once and derives the
// interface's totals from that same reading, so that the queues of one
// scrape always sum to the interface's counters.
func collectInterface(ch chan<- prometheus.Metric, ifc *xfrmif.Interface) {
	name := ifc.Name()
	var total xfrmif.Stats
	for q, st := range ifc.QueueStats() {
		total = total.Add(st)
		queue := strconv.Itoa(q)
		emit(ch, descQueuePackets, prometheus.CounterValue, st.RxPackets, name, queue, "rx")
		emit(ch, descQueuePackets, prometheus.CounterValue, st.TxPackets, name, queue, "tx")
	}
	for _, m := range []struct {
		desc   *prometheus.Desc
		rx, tx uint64
	}{
		{descInterfacePackets, total.RxPackets, total.TxPackets},
		{descInterfaceBytes, total.RxBytes, total.TxBytes},
		{descInterfaceErrors, total.RxErrors, total.TxErrors},
		{descInterfaceDrops, total.RxDrops, total.TxDrops},
	} {
		emit(ch, m.desc, prometheus.CounterValue, m.rx, name, "rx")
		emit(ch, m.desc, prometheus.CounterValue, m.tx, name, "tx")
	}
}

// emit sends one sample. A label value that is not valid UTF-8 (which
// the config's checks should make impossible) fails this sample in the
// scrape's error log instead of panicking in the daemon.
func emit(ch chan<- prometheus.Metric, desc *prometheus.Desc, typ prometheus.ValueType, v uint64, labels ...string) {
	m, err := prometheus.NewConstMetric(desc, typ, float64(v), labels...)
	if err != nil {
		m = prometheus.NewInvalidMetric(desc, err)
	}
	ch <- m
}

func boolValue(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// newMetricsRegistry returns a registry of the node's metrics and the Go
// runtime's and process's (go_*, process_*). It is private, so nothing
// else linked into the binary adds to it.
func newMetricsRegistry(src metricsSource) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		newNodeCollector(src),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// metricsHandler serves the node's metrics in the Prometheus formats at
// /metrics and, when pprof is true (the config's pprof key), Go's profiler
// at /debug/pprof/. The profiler is opt-in: it hands out goroutine stacks
// and heap profiles, and a CPU profile or trace costs CPU for as long as
// the caller asks.
func metricsHandler(n *Daemon, pprofOn bool) http.Handler {
	reg := newMetricsRegistry(nodeMetricsSource(n))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog: n.log.WithField("part", "metrics"),
		// One bad sample must not blank the whole scrape: serve the
		// rest and log the error (counted in
		// promhttp_metric_handler_errors_total).
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      reg,
		// A scrape is not free (about 14 ms of CPU with 1,000 SAs, see
		// BenchmarkMetricsScrape); a runaway scraper gets 503 rather
		// than the data path's CPU.
		MaxRequestsInFlight: 4,
	}))
	if pprofOn {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// metricsExposureWarning returns what to log when the metrics listener,
// bound at addr, is reachable from other hosts, and "" when it listens on
// a loopback address. What it serves names every SA's SPI and peer
// address with its traffic, and with pprof the daemon's stacks, heap
// profiles and CPU profiles on demand.
func metricsExposureWarning(addr net.Addr, pprofOn bool) string {
	ta, ok := addr.(*net.TCPAddr)
	if !ok || ta.IP.IsLoopback() {
		return ""
	}
	where := "which is not a loopback address"
	if ta.IP.IsUnspecified() {
		where = "every address of the host"
	}
	what := "the SAs' SPIs, peer addresses and traffic counters"
	if pprofOn {
		what += " and Go's profiler (pprof: true)"
	}
	return fmt.Sprintf("metrics: listening on %s, %s: whoever can reach it reads %s; listen on 127.0.0.1 or ::1, or firewall the port", ta, where, what)
}
