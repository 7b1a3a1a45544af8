package stack

import (
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// forbiddenImports are the packages a program that links the sidecar
// must not get with it: the config file's YAML decoder (package config)
// and the IKE engine (package ike and its parts, ikenode). A program that
// wants either imports it itself.
var forbiddenImports = []string{
	"github.com/ipsecd/ipsecd/config",
	"github.com/ipsecd/ipsecd/ike",
	"github.com/ipsecd/ipsecd/ikenode",
	"go.yaml.in/yaml/v3",
}

// TestImportsNoConfigOrIKE: package stack links neither config nor the
// IKE engine; a failure names the chain of imports that brings one in.
func TestImportsNoConfigOrIKE(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports", ".")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list: %v", err)
		}
		imports[p.ImportPath] = p.Imports
	}
	const root = "github.com/ipsecd/ipsecd/stack"
	// Breadth first from stack: via[p] is the package that imports p on
	// a shortest chain.
	via := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, q := range imports[p] {
			if _, seen := via[q]; !seen {
				via[q] = p
				queue = append(queue, q)
			}
		}
	}
	var linked []string
	for p := range via {
		linked = append(linked, p)
	}
	slices.Sort(linked)
	for _, p := range linked {
		for _, bad := range forbiddenImports {
			if p != bad && !strings.HasPrefix(p, bad+"/") {
				continue
			}
			chain := []string{p}
			for q := via[p]; q != ""; q = via[q] {
				chain = append([]string{q}, chain...)
			}
			t.Errorf("stack links %s: %s", p, strings.Join(chain, " -> "))
		}
	}
}
