package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/control/controltest"
)

// TestIKECommandErrors: the ike commands' usage errors (exit 2), and a
// daemon without IKE answers that it runs none (exit 1).
func TestIKECommandErrors(t *testing.T) {
	srv := controltest.Start(t, &controltest.Backend{})
	for _, tt := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"ike"}, 2, "want ipsecd ike list|initiate|terminate|rekey"},
		{[]string{"ike", "fly"}, 2, `unknown ike command "fly"`},
		{[]string{"ike", "initiate", "--control", srv.Path()}, 2, "want one of --ike NAME and --child NAME"},
		{[]string{"ike", "rekey", "--ike", "a", "--child", "b", "--control", srv.Path()}, 2, "want one of --ike NAME and --child NAME"},
		{[]string{"ike", "list", "--control", srv.Path()}, 1, "IKE is not running"},
		{[]string{"ike", "terminate", "--ike", "a", "--control", srv.Path()}, 1, "IKE is not running"},
	} {
		var o, e bytes.Buffer
		if code := run(tt.args, &o, &e); code != tt.code || !strings.Contains(o.String()+e.String(), tt.out) {
			t.Errorf("ipsecd %q: exit %d, output %q; want %d and %q", tt.args, code, o.String()+e.String(), tt.code, tt.out)
		}
	}
}

// TestIKEListEscapes: what a peer chose (its identity, here a terminal
// escape and a CR LF that would fake a line) is printed escaped by ike
// list, even from a daemon that sent it raw; JSON escapes it by itself.
func TestIKEListEscapes(t *testing.T) {
	const evil = "\x1b[2J\r\nfake"
	var o bytes.Buffer
	writeIKESAs(&o, []control.IKESAInfo{{Name: "rw", State: "ESTABLISHED", LocalID: "b.test", RemoteID: evil,
		Children: []control.IKEChildInfo{{Name: "net", State: "INSTALLED", LocalTS: []string{evil}}}}})
	out := o.String()
	if strings.ContainsAny(out, "\x1b\r") || strings.Contains(out, "\nfake") {
		t.Errorf("ike list printed the peer's control characters:\n%q", out)
	}
	if !strings.Contains(out, `  remote '\x1b[2J\x0d\x0afake' @`) {
		t.Errorf("ike list does not show the peer's identity escaped:\n%s", out)
	}
	if n := strings.Count(out, "\n"); n != 11 {
		t.Errorf("ike list printed %d lines, want 11:\n%s", n, out)
	}
}
