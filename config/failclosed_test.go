package config

import (
	"strings"
	"testing"
)

// TestFailClosed parses fail_closed: keep_on_stop defaults to false (a
// clean stop removes the guards), and a wrong key or type is refused with
// its line and field.
func TestFailClosed(t *testing.T) {
	for _, tt := range []struct {
		text string
		keep bool
		err  string
	}{
		{"", false, ""},
		{"fail_closed: {}", false, ""},
		{"fail_closed: {keep_on_stop: true}", true, ""},
		{"fail_closed:\n  keep_on_stop: false", false, ""},
		{"fail_closed: {keep_on_stop: yes please}", false, `f.yaml:1: fail_closed.keep_on_stop: want true or false`},
		{"fail_closed: {keep_on_sotp: true}", false, `f.yaml:1: fail_closed.keep_on_sotp: unknown field; did you mean keep_on_stop?`},
		{"fail_closed: on_stop", false, `f.yaml:1: fail_closed: want a mapping`},
	} {
		c, err := Parse("f.yaml", []byte(tt.text))
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("Parse(%q): %v", tt.text, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("Parse(%q): error %v, want %q", tt.text, err, tt.err)
		case err == nil && c.FailClosed.KeepOnStop != tt.keep:
			t.Errorf("Parse(%q): keep_on_stop %v, want %v", tt.text, c.FailClosed.KeepOnStop, tt.keep)
		}
	}
}

// TestInterfaceTable parses interfaces[].table: a table of the user's
// own, main (kept as 0, the default), and the kernel's local and default
// tables refused.
func TestInterfaceTable(t *testing.T) {
	for _, tt := range []struct {
		table string
		want  uint32
		err   string
	}{
		{"100", 100, ""},
		{"4294967295", 4294967295, ""},
		{"254", 0, ""},
		{"255", 0, `f.yaml:1: interfaces[0].table: 255 is the kernel's local table`},
		{"253", 0, `f.yaml:1: interfaces[0].table: 253 is the kernel's default table`},
		{"0", 0, `f.yaml:1: interfaces[0].table:`},
		{"main", 0, `f.yaml:1: interfaces[0].table: want an integer`},
	} {
		text := "interfaces: [{name: ipsec1, if_id: 1, routes: [192.0.2.2/32], table: " + tt.table + "}]"
		c, err := Parse("f.yaml", []byte(text))
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("table %s: %v", tt.table, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("table %s: error %v, want %q", tt.table, err, tt.err)
		case err == nil && c.Interfaces[0].Table != tt.want:
			t.Errorf("table %s: got %d, want %d", tt.table, c.Interfaces[0].Table, tt.want)
		}
	}
}
