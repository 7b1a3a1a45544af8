package main

import (
	"fmt"
	"os"
)

// runDaemon is `ipsecd run --config FILE`. Placeholder: the daemon wiring
// replaces this file.
func runDaemon(args []string) int {
	fmt.Fprintln(os.Stderr, "ipsecd run: not implemented yet")
	return 1
}

// runDemo is `ipsecd demo`. Placeholder: the daemon wiring replaces this
// file.
func runDemo(args []string) int {
	fmt.Fprintln(os.Stderr, "ipsecd demo: not implemented yet")
	return 1
}
