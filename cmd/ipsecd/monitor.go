package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/internal/printable"
)

// cmdMonitor is `ipsecd monitor`: the daemon's events as they happen,
// one line each, as ip xfrm monitor prints them (--json: one JSON object
// per line). It runs until interrupted, or until the daemon stops (exit
// status 1). A monitor that falls behind loses events, and is told how
// many ("events_lost"): the daemon never waits for it.
func cmdMonitor(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("monitor", "monitor [--json] [--control PATH | --config FILE]\n"+
		"Prints SAs added, deleted, updated and expired, policies added and deleted, interfaces up and down,\n"+
		"and IKE's events: IKE SAs and children up, down, rekeyed and failed (ike_*, child_*).", stderr)
	cf := addCtlFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	path, err := cf.path()
	if err != nil {
		return err
	}
	es, err := control.OpenMonitor(path)
	if err != nil {
		return err
	}
	defer es.Close()
	for {
		ev, err := es.Next()
		if errors.Is(err, io.EOF) {
			return errors.New("the daemon closed the stream (it stopped)")
		}
		if err != nil {
			return err
		}
		if cf.json {
			err = writeJSONLine(stdout, ev)
		} else {
			_, err = fmt.Fprintln(stdout, eventText(&ev))
		}
		if err != nil {
			return err
		}
	}
}

// eventText writes an event on one line:
//
//	2026-12-01 14:25:00 state_expired spi 0x1001 dir out dst 192.0.2.2 src 192.0.2.1 if_id 1 expire soft reason packets
//	2026-12-01 14:25:00 child_rekeyed connection gw child net ike_spi_i 8f957894685ad3e7 ike_spi_r 21e5cb45811bbd55 local 192.0.2.1:500 remote 192.0.2.2:500 local_id a.test peer_id b.test spi_in 0xc1a2b3c4 spi_out 0xc5d6e7f8 old_spi_in 0xc0000001 old_spi_out 0xc0000002 reason rekeyed by us
//
// An IKE event's detail comes in control.DetailOrder, then its reason,
// then its error (the one free text, last).
//
// The line is escaped (printable.Escape): an IKE event's detail carries
// the peer's text, which must neither reach the terminal with control
// characters nor break the line into two.
func eventText(ev *control.Event) string {
	var b strings.Builder
	b.WriteString(ev.Time.Local().Format(time.DateTime) + " " + ev.Type)
	if s := ev.State; s != nil {
		fmt.Fprintf(&b, " spi %s dir %s dst %s src %s if_id %d", s.SPI, s.Dir, s.Dst, s.Src, s.IfID)
	}
	if p := ev.Policy; p != nil {
		pol, err := p.Policy()
		if err == nil {
			fmt.Fprintf(&b, " %v dir %s action %s if_id %d", pol.Selector, pol.Dir, pol.Action, pol.IfID)
		}
	}
	if ev.Interface != "" {
		fmt.Fprintf(&b, " %s if_id %d", ev.Interface, ev.IfID)
	}
	for _, k := range control.DetailOrder {
		if v, ok := ev.Detail[k]; ok {
			fmt.Fprintf(&b, " %s %s", k, v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(ev.Detail)) {
		if k != control.DetailError && !slices.Contains(control.DetailOrder, k) {
			fmt.Fprintf(&b, " %s %s", k, ev.Detail[k])
		}
	}
	if ev.Expire != "" {
		b.WriteString(" expire " + ev.Expire)
	}
	if ev.Reason != "" {
		b.WriteString(" reason " + ev.Reason)
	}
	if ev.Lost != 0 {
		fmt.Fprintf(&b, " %d events (this monitor fell behind)", ev.Lost)
	}
	if v, ok := ev.Detail[control.DetailError]; ok {
		b.WriteString(" error " + v)
	}
	return printable.Escape(b.String())
}

// writeJSONLine writes v as one line of JSON (JSON lines: one event per
// line, for jq and log shippers).
func writeJSONLine(w io.Writer, v any) error {
	out, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(out, '\n'))
	return err
}
