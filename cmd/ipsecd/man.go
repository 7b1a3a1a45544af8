package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// manCommand is `ipsecd man DIR`: one man page per command (ipsecd.1,
// ipsecd-state-add.1, ...) from the same tree as help and completion. It
// is hidden: packagers run it at build time (go run ./cmd/ipsecd man DIR).
func manCommand(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:    "man DIR",
		Short:  "Write the man pages into DIR",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return &ran{"man", writeManPages(root, args[0])}
		},
	}
}

func writeManPages(root *cobra.Command, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root.InitDefaultVersionFlag() // cobra adds --version when it runs, not before
	root.DisableAutoGenTag = true // reproducible pages: no generation date
	header := &doc.GenManHeader{Title: "IPSECD", Section: "1", Source: "ipsecd " + root.Version, Manual: "ipsecd manual"}
	if err := doc.GenManTree(root, header, dir); err != nil {
		return fmt.Errorf("writing the man pages into %s: %w", dir, err)
	}
	return nil
}
