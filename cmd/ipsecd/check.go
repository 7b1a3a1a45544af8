package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/ipsecd/ipsecd/config"
)

// cmdCheck is `ipsecd check --config FILE`: on success it prints
// "FILE: ok: N interfaces, M states, K policies"; otherwise each problem as
// "FILE:LINE: field: what is wrong" on stderr, and exits 1. Warnings (a
// file holding keys that group or others can read) go to stderr as
// "warning: ..." and do not change the exit status.
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
	c.WipeKeys()
	fmt.Fprintf(stdout, "%s: ok: %s\n", *file, c.Summary())
	return nil
}
