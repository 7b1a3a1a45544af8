package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// cmdHealth is `ipsecd health`: exit status 0 when the daemon answers a
// ping on its control socket within --timeout, 1 with a one-line reason
// otherwise. It is what container HEALTHCHECKs and Kubernetes probes run:
// unlike `stats` it prints nothing when all is well and asks the daemon
// for no work beyond the answer.
func cmdHealth(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("health", "health [--timeout D] [--json] [--control PATH | --config FILE]", stderr)
	cf := addCtlFlags(fs)
	// Shorter than a probe's own timeout (Docker's HEALTHCHECK and the
	// kubelet default to 30 s and 1 s), so that a stalled daemon is
	// reported with a reason rather than killed with the probe.
	timeout := fs.Duration("timeout", 5*time.Second, "give up when the daemon has not answered after `D`")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *timeout <= 0 {
		return usagef("--timeout %v: want a positive duration", *timeout)
	}
	if err := ping(cf, *timeout); err != nil {
		// A probe's log keeps one line per failure: fold whatever the
		// config loader or the socket said into it.
		return errors.New(strings.Join(strings.Fields(err.Error()), " "))
	}
	if cf.json {
		_, err := fmt.Fprintln(stdout, `{"healthy": true}`)
		return err
	}
	return nil
}

// ping dials the daemon as the control commands do and asks it to answer.
func ping(cf *ctlFlags, timeout time.Duration) error {
	done := make(chan error, 1)
	// control.Dial has a bound of its own (5 s); a daemon that accepts
	// but never reads is bounded by the client's request timeout. The
	// timer covers both, so the whole check ends within timeout.
	go func() {
		c, err := cf.dial()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		c.Timeout = timeout
		done <- c.Ping()
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		return fmt.Errorf("no answer within %v", timeout)
	}
}
