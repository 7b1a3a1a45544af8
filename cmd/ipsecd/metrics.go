package main

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/pprof"

	"github.com/ipsecd/ipsecd/sa"
)

// metricsHandler serves the node's counters in the Prometheus text format
// at /metrics, and Go's profiler at /debug/pprof/ (the listener is opt-in
// and meant for loopback): ipsecd_xfrm_stat_total{counter}, ipsecd_sa_{bytes,packets}_total{spi,dir},
// ipsecd_interface_{packets,bytes,errors,drops}_total{name,dir}. Keys are never part of it.
func metricsHandler(n *node) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		bw := bufio.NewWriter(w)
		defer bw.Flush()
		b := (*backend)(n)

		fmt.Fprintln(bw, "# HELP ipsecd_xfrm_stat_total Global xfrm counters, named as /proc/net/xfrm_stat.")
		fmt.Fprintln(bw, "# TYPE ipsecd_xfrm_stat_total counter")
		for _, c := range b.Stats() {
			fmt.Fprintf(bw, "ipsecd_xfrm_stat_total{counter=%q} %d\n", c.Name, c.Value)
		}

		states := n.sad.States()
		stats := make([]sa.Stats, len(states))
		for i, s := range states {
			stats[i] = s.Stats()
		}
		for _, m := range []struct {
			name, help string
			value      func(i int) uint64
		}{
			{"ipsecd_sa_bytes_total", "Bytes sealed or opened by an SA.", func(i int) uint64 { return stats[i].Bytes }},
			{"ipsecd_sa_packets_total", "Packets sealed or opened by an SA.", func(i int) uint64 { return stats[i].Packets }},
		} {
			fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s counter\n", m.name, m.help, m.name)
			for i, s := range states {
				fmt.Fprintf(bw, "%s{spi=\"0x%x\",dir=%q} %d\n", m.name, s.SPI(), s.Dir().String(), m.value(i))
			}
		}

		ifcs := b.Interfaces()
		for _, m := range []struct {
			name, help string
			rx, tx     func(i int) uint64
		}{
			{"ipsecd_interface_packets_total", "Packets through an xfrm interface.", func(i int) uint64 { return ifcs[i].RX.Packets }, func(i int) uint64 { return ifcs[i].TX.Packets }},
			{"ipsecd_interface_bytes_total", "Bytes through an xfrm interface.", func(i int) uint64 { return ifcs[i].RX.Bytes }, func(i int) uint64 { return ifcs[i].TX.Bytes }},
			{"ipsecd_interface_errors_total", "Errors on an xfrm interface.", func(i int) uint64 { return ifcs[i].RX.Errors }, func(i int) uint64 { return ifcs[i].TX.Errors }},
			{"ipsecd_interface_drops_total", "Drops on an xfrm interface.", func(i int) uint64 { return ifcs[i].RX.Drops }, func(i int) uint64 { return ifcs[i].TX.Drops }},
		} {
			fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s counter\n", m.name, m.help, m.name)
			for i, ifc := range ifcs {
				fmt.Fprintf(bw, "%s{name=%q,dir=\"rx\"} %d\n", m.name, ifc.Name, m.rx(i))
				fmt.Fprintf(bw, "%s{name=%q,dir=\"tx\"} %d\n", m.name, ifc.Name, m.tx(i))
			}
		}
	})
	return mux
}
