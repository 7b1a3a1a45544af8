package stack

import (
	"testing"

	"github.com/ipsecd/ipsecd/internal/importcheck"
)

// TestImportsNoConfigOrIKE: package stack links neither the config file's
// YAML decoder (package config) nor the IKE engine (package ike and its
// parts, ikenode): a program that wants either imports it itself
// (stack/stackfile for a config file). A failure names the chain of
// imports that brings one in.
func TestImportsNoConfigOrIKE(t *testing.T) {
	importcheck.Forbid(t, ".",
		"github.com/ipsecd/ipsecd/config",
		"github.com/ipsecd/ipsecd/ike",
		"github.com/ipsecd/ipsecd/ikenode",
		"github.com/ipsecd/ipsecd/daemon",
		"go.yaml.in/yaml/v3",
	)
}
