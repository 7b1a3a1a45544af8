package testdeps

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// runners are the calls whose first string argument is a program to run:
// os/exec's, exec.LookPath, and the test helpers that wrap them
// (integration's mustRun, run and cmd, bench's output and run).
var runners = map[string]bool{
	"Command": true, "CommandContext": true, "LookPath": true,
	"mustRun": true, "run": true, "cmd": true, "output": true,
}

// handles are the names of the context and testing arguments that come
// before the program in CommandContext(ctx, ...) and mustRun(t, ...).
var handles = map[string]bool{"ctx": true, "t": true, "tb": true, "b": true}

// program is what a program name in the tests looks like (not a path, not
// a flag).
var program = regexp.MustCompile(`^[a-z][a-z0-9_.+-]*$`)

// notDebian are programs the tests run that no Debian package brings: the
// Go toolchain, and the binaries the tests build themselves.
var notDebian = map[string]bool{"go": true}

// listedCommands reads the testcmds list of scripts/test.sh.
func listedCommands(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../../scripts/test.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)\ntestcmds="([^"]*)"`).FindSubmatch(b)
	if m == nil {
		t.Fatal(`scripts/test.sh has no testcmds="..." list`)
	}
	cmds := map[string]bool{}
	for _, f := range strings.Fields(string(m[1])) {
		name, pkg, ok := strings.Cut(f, ":")
		if !ok || name == "" || pkg == "" {
			t.Fatalf("scripts/test.sh: testcmds entry %q: want COMMAND:PACKAGE", f)
		}
		cmds[name] = true
	}
	return cmds
}

// TestEveryCommandIsInstalled finds the programs the Go tests and the
// benchmark run and checks that scripts/test.sh installs each.
func TestEveryCommandIsInstalled(t *testing.T) {
	listed := listedCommands(t)
	used := map[string][]string{} // program -> where
	fset := token.NewFileSet()
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && path != "../.." || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		isTest := strings.HasSuffix(path, "_test.go")
		inBench := strings.HasPrefix(filepath.ToSlash(path), "../../bench/")
		if !strings.HasSuffix(path, ".go") || !isTest && !inBench {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			var name string
			switch fn := call.Fun.(type) {
			case *ast.Ident:
				name = fn.Name
			case *ast.SelectorExpr:
				name = fn.Sel.Name
			}
			if !runners[name] {
				return true
			}
			// The program is the first argument after a leading
			// context or testing handle; when it is not a string
			// literal (a binary the test built), it is not looked up.
			for _, a := range call.Args {
				if id, ok := a.(*ast.Ident); ok && handles[id.Name] {
					continue
				}
				lit, ok := a.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					break
				}
				prog, err := strconv.Unquote(lit.Value)
				if err == nil && program.MatchString(prog) {
					used[prog] = append(used[prog], fset.Position(lit.Pos()).String())
				}
				break
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(used) < 5 {
		t.Fatalf("found only %d programs run by the tests; the scan is broken", len(used))
	}
	var progs []string
	for p := range used {
		progs = append(progs, p)
	}
	slices.Sort(progs)
	for _, p := range progs {
		if !listed[p] && !notDebian[p] {
			t.Errorf("the tests run %q (%s), which scripts/test.sh does not list in testcmds: add it with its Debian package", p, strings.Join(used[p], ", "))
		}
	}
	t.Logf("programs the tests run: %v", progs)
}
