// Command ipsecd is a userspace IPsec (ESP) VPN endpoint: the daemon, and
// the commands that check its config file and talk to it through its
// control socket. See docs/design.md and docs/config.md.
//
// Exit status: 0 success, 1 failure (including an invalid config file), 2
// a usage error (unknown command, bad or missing flags).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

const usage = `usage: ipsecd COMMAND [flags]

commands:
  run    --config FILE        run the daemon; SIGHUP reloads FILE, SIGTERM/SIGINT stop it
  demo                        run a self-contained demonstration
  check  --config FILE        validate FILE; print "FILE:LINE: field: what is wrong" per error
  state  list|get|add|delete  SAs, like ip xfrm state
  policy list|add|delete      policies, like ip xfrm policy
  interface list              interfaces and their counters
  stats                       global counters, as /proc/net/xfrm_stat
  ike    list|initiate|terminate|rekey  IKE SAs and children, like swanctl --list-sas, --initiate, ...
  health [--timeout D]        exit 0 when the daemon answers (container and Kubernetes probes)
  genkey --alg ALG [--bits N] fresh key material for ALG, as 0x-hex
  help                        this text

The control commands (state, policy, interface, stats, health, ike) reach the daemon
through --control PATH (default /run/ipsecd/ipsecd.sock) or --config FILE
(its control key), and take --json. Run "ipsecd COMMAND -h" for its flags.

exit status: 0 ok, 1 failure or invalid config, 2 usage error
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// usageError is a mistake on the command line: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// errReported means the command already printed what went wrong.
var errReported = errors.New("reported")

// command is one subcommand: it parses its own flags.
type command func(args []string, stdout, stderr io.Writer) error

var commands = map[string]command{
	"run":       func(args []string, _, _ io.Writer) error { return exitCode(runDaemon(args)) },
	"demo":      func(args []string, _, _ io.Writer) error { return exitCode(runDemo(args)) },
	"check":     cmdCheck,
	"state":     cmdState,
	"policy":    cmdPolicy,
	"interface": cmdInterface,
	"stats":     cmdStats,
	"health":    cmdHealth,
	"genkey":    cmdGenkey,
	"ike":       cmdIKE, // ike.go
}

// exitCode carries a status from a function that reports for itself.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// run runs the command line args (without the program name) and returns
// the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "ipsecd: unknown command %q\n\n%s", name, usage)
		return 2
	}
	err := cmd(args[1:], stdout, stderr)
	if len(args) > 1 && (name == "state" || name == "policy" || name == "interface") && !strings.HasPrefix(args[1], "-") {
		name += " " + args[1] // "ipsecd state add: ..."
	}
	var ue *usageError
	var code exitCode
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &code):
		return int(code)
	case errors.Is(err, errReported):
		return 1
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "ipsecd %s: %s\nRun \"ipsecd %s -h\" for usage.\n", name, ue.msg, name)
		return 2
	}
	fmt.Fprintf(stderr, "ipsecd %s: %s\n", name, strings.TrimSpace(err.Error()))
	return 1
}

// newFlags returns a FlagSet for a subcommand whose errors come back as
// usage errors.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: ipsecd %s\n\nflags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args with fs and refuses leftover arguments.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// isSet reports whether the flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}
