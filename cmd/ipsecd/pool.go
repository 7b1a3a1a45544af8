package main

import (
	"fmt"
	"io"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/internal/printable"
)

// cmdPool is `ipsecd pool list [--leases] [--json]`.
func cmdPool(args []string, stdout, stderr io.Writer) error {
	_, args, err := subcommand("pool", args, stderr, "list")
	if err != nil {
		return err
	}
	fs := newFlags("pool list", "pool list [--leases] [--json] [--control PATH | --config FILE]", stderr)
	cf := addCtlFlags(fs)
	leases := fs.Bool("leases", false, "also list each pool's leases: address, online or offline, identity")
	if err := parse(fs, args); err != nil {
		return err
	}
	return ask(cf, stdout, control.Request{Cmd: "pool.list", Leases: *leases},
		func(c *control.Client) ([]control.PoolInfo, error) { return c.PoolList(*leases) }, writePools)
}

// writePools prints the pools as swanctl --list-pools [--leases] does:
// name, addresses, online / offline / size, then each lease. Identities
// are the peer's text: each line is escaped (printable.Escape).
func writePools(w io.Writer, pools []control.PoolInfo) {
	for _, p := range pools {
		io.WriteString(w, printable.Escape(fmt.Sprintf("%-20s %-40s %5d / %5d / %5d", p.Name, p.Addrs, p.Online, p.Offline, p.Size))+"\n")
		for _, l := range p.Leases {
			io.WriteString(w, printable.Escape(fmt.Sprintf("  %-39s %-7s '%s'", l.Address, l.Status, l.Identity))+"\n")
		}
	}
}
