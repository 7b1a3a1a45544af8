package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version names the build: the module's version when built from a tagged
// module (go install ...@vX), else the commit it was built from (and
// "-dirty" for a modified tree), else "devel"; then the Go toolchain.
func version() string {
	v := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok {
		v = buildVersion(bi)
	}
	return v + " " + runtime.Version()
}

func buildVersion(bi *debug.BuildInfo) string {
	if mv := bi.Main.Version; mv != "" && mv != "(devel)" {
		return mv
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	return "devel-" + rev + dirty
}

// versionCommand is `ipsecd version`, which prints what --version does.
func versionCommand(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of ipsecd and of the Go toolchain that built it",
		Args:  cobra.NoArgs,
		Run: func(c *cobra.Command, _ []string) {
			fmt.Fprintf(stdout, "ipsecd %s\n", c.Root().Version)
		},
	}
}
