package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The command tree is cobra's, so that help, completion and man pages come
// from one definition; each command still parses its own flag.FlagSet
// (DisableFlagParsing), which keeps the flags' syntax (-flag and --flag,
// -flag=value) and the usage texts the scripts and tests rely on. The
// FlagSet's flags are copied into the cobra command (describe) so that
// completion and the man pages know them.

// topic is one command of the tree.
type topic struct {
	name  string
	short string
	run   command
	verbs []topic // state list, state add, ...: run takes "VERB ARGS..."
}

var topics = []topic{
	{name: "run", short: "Run the daemon; SIGHUP reloads the config, SIGTERM/SIGINT stop it", run: cmdRun},
	{name: "demo", short: "Run a self-contained demonstration", run: cmdDemo},
	{name: "check", short: "Validate a config file", run: cmdCheck},
	{name: "state", short: "SAs, like ip xfrm state", run: cmdState, verbs: []topic{
		{name: "list", short: "List the SAs"},
		{name: "get", short: "Print one SA"},
		{name: "add", short: "Add an SA"},
		{name: "delete", short: "Delete an SA"},
		{name: "update", short: "Change an SA's lifetimes in place"},
		{name: "flush", short: "Delete every SA added over the control socket"},
		{name: "count", short: "Count the SAs"},
	}},
	{name: "policy", short: "Policies, like ip xfrm policy", run: cmdPolicy, verbs: []topic{
		{name: "list", short: "List the policies"},
		{name: "add", short: "Add a policy"},
		{name: "delete", short: "Delete a policy"},
	}},
	{name: "interface", short: "Interfaces and their counters", run: cmdInterface, verbs: []topic{
		{name: "list", short: "List the interfaces and their counters"},
	}},
	{name: "stats", short: "Global counters, as /proc/net/xfrm_stat", run: cmdStats},
	{name: "ike", short: "IKE SAs and children, like swanctl", run: cmdIKE, verbs: []topic{
		{name: "list", short: "List the IKE SAs and their children, like swanctl --list-sas"},
		{name: "initiate", short: "Start a connection or a child, like swanctl --initiate"},
		{name: "terminate", short: "Close a connection or a child, like swanctl --terminate"},
		{name: "rekey", short: "Rekey a connection or a child, like swanctl --rekey"},
	}},
	{name: "pool", short: "Virtual IP address pools, like swanctl --list-pools", run: cmdPool, verbs: []topic{
		{name: "list", short: "List the pools, and with --leases their leases, like swanctl --list-pools --leases"},
	}},
	{name: "profile", short: "Write a client's profile for a remote-access connection: Apple, Windows or strongSwan", run: cmdProfile, verbs: []topic{
		{name: "apple", short: "An Apple configuration profile (.mobileconfig)"},
		{name: "windows", short: "A PowerShell script for Windows' built-in IKEv2 client"},
		{name: "strongswan", short: "A swanctl.conf client connection"},
	}},
	{name: "health", short: "Exit 0 when the daemon answers (container and Kubernetes probes)", run: cmdHealth},
	{name: "reload", short: "Do what SIGHUP does and return the result or the file's errors", run: cmdReload},
	{name: "monitor", short: "Print SAs, policies, interfaces and IKE SAs as they change, like ip xfrm monitor", run: cmdMonitor},
	{name: "genkey", short: "Print fresh key material for an algorithm, as 0x-hex", run: cmdGenkey},
}

// cmdDemo is `ipsecd demo`: runDemo reports for itself.
func cmdDemo(args []string, _, stderr io.Writer) error { return exitCode(runDemo(args, stderr)) }

// ran is what a command of the tree returned, so that run can tell it from
// cobra's own errors (unknown command, bad flag of a cobra command), which
// are usage errors. name is how messages name the command.
type ran struct {
	name string
	err  error
}

func (r *ran) Error() string { return r.err.Error() }
func (r *ran) Unwrap() error { return r.err }

// flagCapture is the stderr that describe hands a command: newFlags
// records the command's FlagSet and synopsis in it instead of printing.
type flagCapture struct {
	fs       *flag.FlagSet
	synopsis string
}

func (*flagCapture) Write(p []byte) (int, error) { return len(p), nil }

// describe runs fn with -h to learn its flags and synopsis without
// running it (every command defines all its flags before parsing), and
// copies them into c.
func describe(c *cobra.Command, fn command) {
	var capture flagCapture
	_ = fn([]string{"-h"}, &capture, &capture)
	if capture.fs == nil {
		return
	}
	c.Long = "usage: ipsecd " + capture.synopsis
	c.Flags().AddGoFlagSet(capture.fs)
	// The backquotes name a flag's value for flag.PrintDefaults; shells
	// would show them in the completions' descriptions.
	c.Flags().VisitAll(func(f *pflag.Flag) { f.Usage = strings.ReplaceAll(f.Usage, "`", "") })
}

// newRoot builds the command tree writing to stdout and stderr.
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "ipsecd",
		Short:         "A userspace IPsec (ESP) VPN endpoint",
		Long:          usage,
		Version:       version(),
		SilenceErrors: true,
		SilenceUsage:  true,
		// Without a command: the usage, as a usage error.
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprint(stderr, usage)
			return &ran{"", exitCode(2)}
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetVersionTemplate("ipsecd {{.Version}}\n")
	// Help for a command of the tree is that command's own usage (the
	// same text as COMMAND -h, on stdout); the root's is usage.
	fns := map[*cobra.Command]command{}
	defaultHelp := root.HelpFunc()
	root.SetHelpFunc(func(c *cobra.Command, args []string) {
		switch fn, ok := fns[c]; {
		case c == root:
			fmt.Fprint(stdout, usage)
		case ok:
			_ = fn([]string{"-h"}, stdout, stdout)
		default:
			defaultHelp(c, args)
		}
	})
	root.SetHelpCommand(helpCommand(root))
	for _, t := range topics {
		c := leaf(t.name, t.name, t.short, t.run, stdout, stderr)
		fns[c] = t.run
		for _, v := range t.verbs {
			fn := verbOf(t.run, v.name)
			name := t.name + " " + v.name
			if t.name == "ike" {
				name = "ike" // its errors name the verb themselves
			}
			vc := leaf(v.name, name, v.short, fn, stdout, stderr)
			describe(vc, fn)
			fns[vc] = fn
			c.AddCommand(vc)
		}
		if len(t.verbs) == 0 {
			describe(c, t.run)
		}
		root.AddCommand(c)
	}
	root.AddCommand(versionCommand(stdout), manCommand(root))
	return root
}

// leaf is a command that parses its own flags: fn gets every argument.
func leaf(use, name, short string, fn command, stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:                use,
		Short:              short,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			return &ran{name, fn(args, stdout, stderr)}
		},
	}
}

// verbOf is noun's command for one verb: "state add ARGS" is
// cmdState("add", ARGS...).
func verbOf(noun command, verb string) command {
	return func(args []string, stdout, stderr io.Writer) error {
		return noun(append([]string{verb}, args...), stdout, stderr)
	}
}

// helpCommand is `ipsecd help [COMMAND...]`: like cobra's, but an unknown
// topic is a usage error rather than a message and exit 0.
func helpCommand(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "help [COMMAND...]",
		Short: "Help about any command",
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			var names []cobra.Completion
			target, _, err := root.Find(args)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			for _, sub := range target.Commands() {
				if sub.IsAvailableCommand() && strings.HasPrefix(sub.Name(), toComplete) {
					names = append(names, cobra.CompletionWithDesc(sub.Name(), sub.Short))
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(_ *cobra.Command, args []string) error {
			target, rest, err := root.Find(args)
			if err != nil || len(rest) > 0 {
				return &ran{"help", usagef("unknown command %q", strings.Join(args, " "))}
			}
			return target.Help()
		},
	}
}

// runTree runs args through the tree and returns the exit status; errors
// are printed here, once.
func runTree(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var r *ran
	if !errors.As(err, &r) {
		// cobra's own: an unknown command, a bad flag of a cobra command.
		fmt.Fprintf(stderr, "ipsecd: %s\nRun \"ipsecd help\" for usage.\n", strings.TrimSpace(err.Error()))
		return 2
	}
	if r.err == nil {
		return 0
	}
	name := r.name
	var ue *usageError
	var code exitCode
	switch {
	case errors.Is(r.err, flag.ErrHelp):
		return 0
	case errors.As(r.err, &code):
		return int(code)
	case errors.Is(r.err, errReported):
		return 1
	case errors.As(r.err, &ue):
		fmt.Fprintf(stderr, "ipsecd %s: %s\nRun \"ipsecd %s -h\" for usage.\n", name, ue.msg, name)
		return 2
	}
	fmt.Fprintf(stderr, "ipsecd %s: %s\n", name, strings.TrimSpace(r.err.Error()))
	return 1
}
