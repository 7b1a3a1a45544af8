package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestCLIHelpAndVersion: help CMD, -h and --help of every kind of command
// (root, group, verb, cobra's own) exit 0; version and --version agree;
// unknown commands and help topics are usage errors printed once.
func TestCLIHelpAndVersion(t *testing.T) {
	tests := []struct {
		args   []string
		code   int
		stdout string // substring of stdout ("" to skip)
		stderr string // substring of stderr ("" to skip)
	}{
		{[]string{"help", "state", "add"}, 0, "--encap espinudp:SPORT:DPORT", ""},
		{[]string{"help", "state"}, 0, "usage: ipsecd state list|get|add", ""},
		{[]string{"help", "health"}, 0, "usage: ipsecd health [--timeout D]", ""},
		{[]string{"help", "ike", "initiate"}, 0, "usage: ipsecd ike initiate --ike NAME", ""},
		{[]string{"help", "completion"}, 0, "bash", ""},
		{[]string{"--help"}, 0, "commands:", ""},
		{[]string{"state", "add", "--help"}, 0, "", "usage: ipsecd state add"},
		{[]string{"policy", "list", "-h"}, 0, "", "usage: ipsecd policy list"},
		{[]string{"demo", "-h"}, 0, "", "usage: ipsecd demo [--mib N] [--netstack]"},
		{[]string{"genkey", "--help"}, 0, "", "usage: ipsecd genkey --alg ALG"},
		{[]string{"completion", "-h"}, 0, "bash", ""},
		{[]string{"version"}, 0, "ipsecd " + version() + "\n", ""},
		{[]string{"--version"}, 0, "ipsecd " + version() + "\n", ""},
		{[]string{"help", "nope"}, 2, "", `ipsecd help: unknown command "nope"`},
		{[]string{"stat"}, 2, "", "Did you mean this?\n\tstate\n\tstats"},
		{[]string{"--frob"}, 2, "", "unknown flag: --frob"},
		{[]string{"version", "extra"}, 2, "", `unknown command "extra"`},
		{[]string{"completion", "bash"}, 0, "__ipsecd_", ""},
		{[]string{"completion", "zsh"}, 0, "#compdef ipsecd", ""},
		{[]string{"completion", "fish"}, 0, "complete -c ipsecd", ""},
		// The flags of a command that parses its own are completed.
		{[]string{"__complete", "state", "add", "--enc"}, 0, "--encap", ""},
		{[]string{"__complete", "sta"}, 0, "stats", ""},
	}
	for _, tt := range tests {
		var o, e bytes.Buffer
		code := run(tt.args, &o, &e)
		if tt.args[0] == "__complete" && strings.Contains(o.String(), "`") {
			t.Errorf("ipsecd %q: a completion's description has backquotes: %q", tt.args, o.String())
		}
		if code != tt.code || !strings.Contains(o.String(), tt.stdout) || !strings.Contains(e.String(), tt.stderr) {
			t.Errorf("ipsecd %q: exit %d\nstdout %q\nstderr %q\nwant %d, stdout with %q, stderr with %q",
				tt.args, code, o.String(), e.String(), tt.code, tt.stdout, tt.stderr)
		}
		if tt.code == 2 && strings.Count(e.String(), "ipsecd") > 0 && strings.Count(e.String(), "Run \"ipsecd") != 1 {
			t.Errorf("ipsecd %q: the error is not printed once: %q", tt.args, e.String())
		}
	}
}

// TestCLIHelpSameAsDashH: `help CMD` prints what `CMD -h` does.
func TestCLIHelpSameAsDashH(t *testing.T) {
	for _, cmd := range [][]string{{"state", "get"}, {"check"}, {"monitor"}, {"ike"}} {
		var ho, he, o, e bytes.Buffer
		run(append([]string{"help"}, cmd...), &ho, &he)
		run(append(cmd, "-h"), &o, &e)
		if ho.String() != e.String() || ho.Len() == 0 {
			t.Errorf("help %q:\n%s\n%q -h:\n%s", cmd, ho.String(), cmd, e.String())
		}
	}
}

func TestBuildVersion(t *testing.T) {
	for _, tt := range []struct {
		bi   debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3"},
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel"},
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "c200e60aabbccddeeff00112233445566778899a"}, {Key: "vcs.modified", Value: "true"}}},
			"devel-c200e60aabbc-dirty"},
	} {
		if got := buildVersion(&tt.bi); got != tt.want {
			t.Errorf("buildVersion(%+v) = %q, want %q", tt.bi, got, tt.want)
		}
	}
	if v := version(); !strings.HasSuffix(v, " "+runtime.Version()) {
		t.Errorf("version() = %q, want the Go version at its end", v)
	}
}

// TestManPages: `ipsecd man DIR` writes a page per command, naming the
// command's flags, those it parses itself included.
func TestManPages(t *testing.T) {
	dir := t.TempDir()
	var o, e bytes.Buffer
	if code := run([]string{"man", dir}, &o, &e); code != 0 {
		t.Fatalf("ipsecd man: exit %d: %s", code, e.String())
	}
	for page, words := range map[string][]string{
		"ipsecd.1":              {".TH \"IPSECD\" \"1\"", "ipsecd-state(1)", "ipsecd-version(1)", `\fB--version\fP`},
		"ipsecd-state-add.1":    {`\fB--encap\fP`, `\fB--spi\fP`, `\fB--if-id\fP`, `\fB--control\fP`, "ipsecd-state(1)"},
		"ipsecd-health.1":       {`\fB--timeout\fP`},
		"ipsecd-ike-initiate.1": {`\fB--child\fP`},
	} {
		b, err := os.ReadFile(filepath.Join(dir, page))
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		for _, w := range words {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s lacks %q:\n%s", page, w, b)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ipsecd-man.1")); err == nil {
		t.Errorf("the hidden man command has a page of its own")
	}
}

// TestCompletionScriptsParse: the completion scripts are valid for their
// shells (bash -n, zsh -n, fish -n where the shell is installed).
func TestCompletionScriptsParse(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		path, err := exec.LookPath(shell)
		if err != nil {
			t.Logf("%s not installed: its script is not checked", shell)
			continue
		}
		var o, e bytes.Buffer
		if code := run([]string{"completion", shell}, &o, &e); code != 0 {
			t.Fatalf("completion %s: exit %d: %s", shell, code, e.String())
		}
		script := filepath.Join(t.TempDir(), "ipsecd."+shell)
		if err := os.WriteFile(script, o.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(path, "-n", script).CombinedOutput(); err != nil {
			t.Errorf("%s -n: %v\n%s", shell, err, out)
		}
	}
}
