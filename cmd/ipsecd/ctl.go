package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net/netip"
	"strings"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/sa"
)

// ctlFlags are the flags every control command takes.
type ctlFlags struct {
	fs      *flag.FlagSet
	control string
	config  string
	json    bool
}

func addCtlFlags(fs *flag.FlagSet) *ctlFlags {
	f := &ctlFlags{fs: fs}
	fs.StringVar(&f.control, "control", config.DefaultControl, "the daemon's control socket `PATH`")
	fs.StringVar(&f.config, "config", "", "take the control socket from the config `FILE`'s control key")
	fs.BoolVar(&f.json, "json", false, "print JSON")
	return f
}

// path is the daemon's control socket: --control if given, else the
// config file's control key, else the default.
func (f *ctlFlags) path() (string, error) {
	if f.config != "" && !isSet(f.fs, "control") {
		return config.ControlPath(f.config)
	}
	return f.control, nil
}

// dial connects to the daemon (path).
func (f *ctlFlags) dial() (*control.Client, error) {
	path, err := f.path()
	if err != nil {
		return nil, err
	}
	return control.Dial(path)
}

// do runs one request and prints its result as indented JSON (--json).
func (f *ctlFlags) printJSON(stdout io.Writer, c *control.Client, req control.Request) error {
	raw, err := c.Do(req)
	if err != nil {
		return err
	}
	if len(raw) == 0 {
		return nil
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err = stdout.Write(buf.Bytes())
	return err
}

// subcommand splits "state list ..." into the verb and its arguments.
func subcommand(noun string, args []string, stderr io.Writer, verbs ...string) (string, []string, error) {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fmt.Fprintf(stderr, "usage: ipsecd %s %s [flags]\nRun \"ipsecd %s %s -h\" for the flags of one.\n",
			noun, strings.Join(verbs, "|"), noun, verbs[0])
		return "", nil, flag.ErrHelp
	}
	if len(args) == 0 {
		return "", nil, usagef("want ipsecd %s %s", noun, strings.Join(verbs, "|"))
	}
	for _, v := range verbs {
		if args[0] == v {
			return v, args[1:], nil
		}
	}
	return "", nil, usagef("unknown %s command %q; want %s", noun, args[0], strings.Join(verbs, ", "))
}

func cmdPolicy(args []string, stdout, stderr io.Writer) error {
	verb, args, err := subcommand("policy", args, stderr, "list", "add", "delete")
	if err != nil {
		return err
	}
	if verb == "list" {
		fs := newFlags("policy list", "policy list [--json] [--control PATH | --config FILE]", stderr)
		cf := addCtlFlags(fs)
		if err := parse(fs, args); err != nil {
			return err
		}
		return listing(cf, stdout, control.Request{Cmd: "policy.list"}, (*control.Client).Policies, writePolicy)
	}
	fs := newFlags("policy "+verb, "policy "+verb+" --dir in|out --if-id N [--src PREFIX] [--dst PREFIX] [--action allow|block] [flags]", stderr)
	cf := addCtlFlags(fs)
	dir := fs.String("dir", "", "in or out")
	ifID := fs.Uint("if-id", 0, "the interface's if_id `N`")
	src := fs.String("src", "", "inner source `PREFIX` (default: any)")
	dst := fs.String("dst", "", "inner destination `PREFIX` (default: any)")
	action := fs.String("action", "allow", "allow or block")
	if err := parse(fs, args); err != nil {
		return err
	}
	p := sa.Policy{IfID: uint32(*ifID)}
	p.Dir, _ = sa.ParseDir(*dir)
	p.Action, _ = sa.ParseAction(*action)
	var bad []string
	if p.Dir == 0 {
		bad = append(bad, fmt.Sprintf("--dir %q: want in or out", *dir))
	}
	if *ifID == 0 || *ifID > math.MaxUint32 {
		bad = append(bad, "--if-id: want 1..4294967295")
	}
	if p.Action == 0 {
		bad = append(bad, fmt.Sprintf("--action %q: want allow or block", *action))
	}
	for _, f := range []struct {
		name, val string
		dst       *netip.Prefix
	}{{"src", *src, &p.Selector.Src}, {"dst", *dst, &p.Selector.Dst}} {
		if f.val == "" {
			continue
		}
		pr, err := netip.ParsePrefix(f.val)
		if err != nil {
			bad = append(bad, fmt.Sprintf("--%s %q: want a CIDR prefix", f.name, f.val))
		}
		*f.dst = pr
	}
	if err := usageErrors(bad, func() error { return sa.CheckPolicy(&p) }); err != nil {
		return err
	}
	c, err := cf.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	if verb == "delete" {
		return c.DeletePolicy(p)
	}
	return c.AddPolicy(p)
}

// cmdStats prints one Name<TAB>value line per counter, as
// /proc/net/xfrm_stat does.
func cmdStats(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("stats", "stats [--json] [--control PATH | --config FILE]", stderr)
	cf := addCtlFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	return listing(cf, stdout, control.Request{Cmd: "stats"}, (*control.Client).Stats,
		func(w io.Writer, ct *control.Counter) { fmt.Fprintf(w, "%s\t%d\n", ct.Name, ct.Value) })
}

func cmdInterface(args []string, stdout, stderr io.Writer) error {
	_, args, err := subcommand("interface", args, stderr, "list")
	if err != nil {
		return err
	}
	fs := newFlags("interface list", "interface list [--json] [--control PATH | --config FILE]", stderr)
	cf := addCtlFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	return listing(cf, stdout, control.Request{Cmd: "interface.list"}, (*control.Client).Interfaces, writeInterface)
}

// listing runs a control command that answers a list: ask, writing each
// item with write.
func listing[T any](cf *ctlFlags, stdout io.Writer, req control.Request, fetch func(*control.Client) ([]T, error), write func(io.Writer, *T)) error {
	return ask(cf, stdout, req, fetch, func(w io.Writer, items []T) {
		for i := range items {
			write(w, &items[i])
		}
	})
}

// ask runs one control command: with --json it prints the daemon's
// answer to req as it is, otherwise it fetches the result and writes it
// with write.
func ask[T any](cf *ctlFlags, stdout io.Writer, req control.Request, fetch func(*control.Client) (T, error), write func(io.Writer, T)) error {
	c, err := cf.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	if cf.json {
		return cf.printJSON(stdout, c, req)
	}
	v, err := fetch(c)
	if err != nil {
		return err
	}
	write(stdout, v)
	return nil
}

// usageErrors returns the mistakes of a state or policy on the command
// line as one usage error, one per line: those of its syntax (bad), or
// when there are none, those sa's rules (check) find, named as the
// config file names the fields.
func usageErrors(bad []string, check func() error) error {
	if bad == nil {
		if err := check(); err != nil {
			bad = strings.Split(err.Error(), "\n")
		}
	}
	if bad == nil {
		return nil
	}
	return &usageError{strings.Join(bad, "\n  ")}
}
