package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/daemon"
	"github.com/ipsecd/ipsecd/ikenode"
)

// cmdCheck is `ipsecd check --config FILE`: on success it prints
// "FILE: ok: N interfaces, M states, K policies"; otherwise each problem as
// "FILE:LINE: field: what is wrong" on stderr, and exits 1. Warnings (a
// file holding keys that group or others can read) go to stderr as
// "warning: ..." and do not change the exit status. When the network
// namespace holds fail-closed guards (a crashed or running daemon's), it
// says which a start with FILE would keep and which it would remove.
func cmdCheck(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("check", "check --config FILE", stderr)
	file := fs.String("config", "", "the config `FILE` to validate")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *file == "" {
		return usagef("--config FILE is required")
	}
	c, err := config.Load(*file)
	if err != nil {
		var list config.ErrorList
		if !errors.As(err, &list) {
			return err
		}
		for _, e := range list {
			fmt.Fprintln(stderr, e)
		}
		return errReported
	}
	for _, w := range c.Warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
	if err := ikenode.CheckKeylog(c.IKE.Keylog); err != nil {
		// What run would refuse at start: an existing keylog file that
		// is a link, readable by others, or not ours.
		c.WipeKeys()
		fmt.Fprintf(stderr, "%s: %v\n", *file, err)
		return errReported
	}
	c.WipeKeys()
	fmt.Fprintf(stdout, "%s: ok: %s\n", *file, c.Summary())
	daemon.ReportGuards(stdout, *file, c)
	daemon.ReportRules(stdout, *file, c)
	return nil
}
