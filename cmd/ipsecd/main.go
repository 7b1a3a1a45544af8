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
)

const usage = `usage: ipsecd COMMAND [flags]

commands:
  run    --config FILE        run the daemon; SIGHUP reloads FILE, SIGTERM/SIGINT stop it
  demo                        run a self-contained demonstration
  check  --config FILE        validate FILE; print "FILE:LINE: field: what is wrong" per error
  state  list|get|add|delete|update|flush|count
                              SAs, like ip xfrm state
  policy list|add|delete      policies, like ip xfrm policy
  interface list              interfaces and their counters
  stats                       global counters, as /proc/net/xfrm_stat
  ike    list|initiate|terminate|rekey  IKE SAs and children, like swanctl --list-sas, --initiate, ...
  pool   list [--leases]      virtual IP address pools and leases, like swanctl --list-pools
  profile apple|windows|strongswan --connection NAME --user ID [--config FILE]
                              a client's profile (.mobileconfig, PowerShell, swanctl.conf)
  health [--timeout D]        exit 0 when the daemon answers (container and Kubernetes probes)
  reload                      what SIGHUP does, with the result or the file's FILE:LINE errors
  monitor                     SAs, policies and interfaces as they change, like ip xfrm monitor
  genkey --alg ALG [--bits N] fresh key material for ALG, as 0x-hex
  version                     the version of ipsecd and of Go that built it (also --version)
  completion bash|zsh|fish    a shell completion script
  help [COMMAND...]           this text, or a command's usage (as COMMAND -h)

The control commands (state, policy, interface, stats, health, reload,
monitor, ike, pool) reach the daemon through --control PATH (default
/run/ipsecd/ipsecd.sock) or --config FILE (its control key), and take
--json. Run "ipsecd COMMAND -h" or "ipsecd help COMMAND" for its flags.

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

// command is one command of the tree (cli.go): it parses its own flags.
type command func(args []string, stdout, stderr io.Writer) error

// exitCode carries a status from a function that reports for itself.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// run runs the command line args (without the program name) and returns
// the exit status.
func run(args []string, stdout, stderr io.Writer) int { return runTree(args, stdout, stderr) }

// newFlags returns a FlagSet for a subcommand whose errors come back as
// usage errors.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: ipsecd %s\n\nflags:\n", synopsis)
		fs.PrintDefaults()
	}
	if c, ok := stderr.(*flagCapture); ok { // describe (cli.go) asks for the flags
		c.fs, c.synopsis = fs, synopsis
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
