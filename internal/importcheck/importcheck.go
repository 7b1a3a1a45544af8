// Package importcheck keeps a package's import graph lean: a test calls
// Forbid to fail when the package links one it must not, naming the
// chain of imports that brings it in. It runs `go list -deps`, so it
// sees what the build links (test files excluded).
package importcheck

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Forbid fails t for every package that pkg (an import path, or "." for
// the package under test) links and that forbidden names, itself or a
// package under it (forbidden "example.com/ike" names example.com/ike/dh
// too), with the shortest chain of imports from pkg. It skips t when the
// go command is missing.
func Forbid(t *testing.T, pkg string, forbidden ...string) {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	root, imports, err := graph(pkg)
	if err != nil {
		t.Fatalf("go list %s: %v", pkg, err)
	}
	for _, chain := range Chains(root, imports, forbidden) {
		t.Errorf("%s links %s: %s", root, chain[len(chain)-1], strings.Join(chain, " -> "))
	}
}

// Chains returns, for every package reachable from root in imports (a
// package's direct imports) that forbidden names, the shortest chain of
// imports from root to it, sorted by the package's path.
func Chains(root string, imports map[string][]string, forbidden []string) [][]string {
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
		if p != root && slices.ContainsFunc(forbidden, func(f string) bool { return p == f || strings.HasPrefix(p, f+"/") }) {
			linked = append(linked, p)
		}
	}
	slices.Sort(linked)
	var out [][]string
	for _, p := range linked {
		chain := []string{p}
		for q := via[p]; q != ""; q = via[q] {
			chain = append([]string{q}, chain...)
		}
		out = append(out, chain)
	}
	return out
}

// graph returns pkg's import path and the direct imports of every
// package it links.
func graph(pkg string) (string, map[string][]string, error) {
	out, err := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports", pkg).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = errors.New(strings.TrimSpace(string(ee.Stderr)))
		}
		return "", nil, err
	}
	imports := map[string][]string{}
	var root string // go list -deps prints pkg last
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return "", nil, err
		}
		imports[p.ImportPath] = p.Imports
		root = p.ImportPath
	}
	return root, imports, nil
}
