package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/sa"
)

// The maintenance commands, as ip xfrm and swanctl have them: state
// update, flush and count, and reload. Each is one function that declares
// its flags and runs.

// lifetimeFlags are the lifetime flags of state add and state update.
type lifetimeFlags struct {
	fs                                         *flag.FlagSet
	softBytes, hardBytes, softPackets, hardPkt *uint64
	softAdd, hardAdd                           *uint64
}

func addLifetimeFlags(fs *flag.FlagSet) *lifetimeFlags {
	return &lifetimeFlags{
		fs:          fs,
		softBytes:   fs.Uint64("soft-bytes", 0, "soft limit in bytes (0: none)"),
		hardBytes:   fs.Uint64("hard-bytes", 0, "hard limit in bytes (0: none)"),
		softPackets: fs.Uint64("soft-packets", 0, "soft limit in packets (0: none)"),
		hardPkt:     fs.Uint64("hard-packets", 0, "hard limit in packets (0: none)"),
		softAdd:     fs.Uint64("soft-add-seconds", 0, "soft limit in seconds since added (0: none)"),
		hardAdd:     fs.Uint64("hard-add-seconds", 0, "hard limit in seconds since added (0: none)"),
	}
}

// lifetime returns base with the limits given on the command line in
// place of its own.
func (f *lifetimeFlags) lifetime(base sa.Lifetime) (sa.Lifetime, error) {
	given, err := sa.LifetimeSeconds{SoftBytes: *f.softBytes, HardBytes: *f.hardBytes,
		SoftPackets: *f.softPackets, HardPackets: *f.hardPkt,
		SoftAddSeconds: *f.softAdd, HardAddSeconds: *f.hardAdd}.Lifetime()
	if err != nil {
		return base, err
	}
	for _, o := range []struct {
		name string
		set  func()
	}{
		{"soft-bytes", func() { base.SoftBytes = given.SoftBytes }},
		{"hard-bytes", func() { base.HardBytes = given.HardBytes }},
		{"soft-packets", func() { base.SoftPackets = given.SoftPackets }},
		{"hard-packets", func() { base.HardPackets = given.HardPackets }},
		{"soft-add-seconds", func() { base.SoftAdd = given.SoftAdd }},
		{"hard-add-seconds", func() { base.HardAdd = given.HardAdd }},
	} {
		if isSet(f.fs, o.name) {
			o.set()
		}
	}
	return base, nil
}

// any reports whether any lifetime flag was given.
func (f *lifetimeFlags) any() bool {
	for _, n := range []string{"soft-bytes", "hard-bytes", "soft-packets", "hard-packets", "soft-add-seconds", "hard-add-seconds"} {
		if isSet(f.fs, n) {
			return true
		}
	}
	return false
}

// stateUpdate is `ipsecd state update`: new limits for a running SA, in
// place, as ip xfrm state update. The limits not given stay as they are.
func stateUpdate(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("state update", "state update --spi SPI --dst ADDR [--dir in|out] [lifetime flags] [flags]\n"+
		"Changes the SA's limits in place (keys, sequence numbers and counters stay); limits not given stay.\n"+
		"A reload sets an SA of the config file back to the file's limits.", stderr)
	cf := addCtlFlags(fs)
	idf := addStateIDFlags(fs)
	life := addLifetimeFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	id, err := idf.id()
	if err != nil {
		return err
	}
	if !life.any() {
		return usagef("give at least one lifetime flag (--soft-bytes, --hard-packets, ...)")
	}
	c, err := cf.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	st, err := c.GetState(id, false)
	if err != nil {
		return err
	}
	l, err := life.lifetime(st.Config.Lifetime)
	if err != nil {
		return &usageError{err.Error()}
	}
	id.Dir = st.Config.Dir // the SA found, not another that appeared since
	return c.UpdateState(id, l)
}

// stateFlush is `ipsecd state flush`: every SA removed, as ip xfrm state
// flush.
func stateFlush(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("state flush", "state flush [--json] [--control PATH | --config FILE]\n"+
		"Removes every SA, whoever installed it (the config file's too, until a reload with fresh keys).", stderr)
	cf := addCtlFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	return ask(cf, stdout, control.Request{Cmd: "state.flush"}, (*control.Client).FlushStates,
		func(w io.Writer, n int) { fmt.Fprintf(w, "flushed %d SAs\n", n) })
}

// stateCount is `ipsecd state count`, as ip xfrm state count.
func stateCount(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("state count", "state count [--json] [--control PATH | --config FILE]", stderr)
	cf := addCtlFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	return ask(cf, stdout, control.Request{Cmd: "state.count"}, (*control.Client).CountStates,
		func(w io.Writer, n control.StateCount) {
			fmt.Fprintf(w, "SAD count %d (in %d, out %d)\n", n.Count, n.In, n.Out)
		})
}

// cmdReload is `ipsecd reload`: what SIGHUP does, with the answer. It
// prints what changed, or the file's errors (FILE:LINE: field: message)
// and exits 1; the running config then stays.
func cmdReload(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("reload", "reload [--json] [--control PATH | --config FILE]\n"+
		"Applies the running daemon's config file, as SIGHUP does, and prints what changed or why not.", stderr)
	cf := addCtlFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	return ask(cf, stdout, control.Request{Cmd: "reload"},
		func(c *control.Client) (control.ReloadResult, error) {
			r, err := c.Reload()
			if err != nil {
				return r, fmt.Errorf("refused, the running config stays:\n%s", err)
			}
			return r, nil
		}, writeReload)
}

// writeReload prints what a reload changed.
func writeReload(w io.Writer, r control.ReloadResult) {
	fmt.Fprintf(w, "%s: reloaded: interfaces added %d removed %d reconfigured %d replaced %d\n",
		r.File, r.InterfacesAdded, r.InterfacesRemoved, r.InterfacesReconfigured, r.InterfacesReplaced)
	fmt.Fprintf(w, "  states added %d removed %d kept %d taken %d updated %d\n",
		r.StatesAdded, r.StatesRemoved, r.StatesKept, r.StatesTaken, r.StatesUpdated)
	fmt.Fprintf(w, "  policies added %d removed %d kept %d taken %d\n", r.PoliciesAdded, r.PoliciesRemoved, r.PoliciesKept, r.PoliciesTaken)
	for _, warning := range r.Warnings {
		fmt.Fprintln(w, "warning: "+strings.TrimSpace(warning))
	}
}
