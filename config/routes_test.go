package config

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestRoadWarriorRoutes: a full tunnel (a remote_ts that holds the
// gateway) is refused, naming the child, into an interface without a
// table of its own, and taken into one with a table; rule_priority needs
// the table and a priority before the main table's rule.
func TestRoadWarriorRoutes(t *testing.T) {
	alice := "  - {type: eap, ids: [alice], secret: alice-pw}\n"
	local := "{auth: eap-mschapv2, eap_id: alice}"
	base := raClient(t, local, "", alice)
	tests := []struct {
		name, iface, remoteTS, want string
	}{
		{"split tunnel, main table", "{name: ipsec1, if_id: 1}", "[10.4.0.0/24]", ""},
		{"full tunnel, main table", "{name: ipsec1, if_id: 1}", "[10.4.0.0/24, 0.0.0.0/0]",
			`connections[0].children[0].remote_ts: child "net" routes 0.0.0.0/0, which holds the gateway 192.0.2.1, into interface ipsec1's main table`},
		{"the gateway's subnet, main table", "{name: ipsec1, if_id: 1}", "[192.0.2.0/24]", `routes 192.0.2.0/24, which holds the gateway 192.0.2.1`},
		{"full tunnel, a table", "{name: ipsec1, if_id: 1, table: 220, rule_priority: 220}", "[0.0.0.0/0, \"::/0\"]", ""},
		{"full tunnel, a table, the operator's rule", "{name: ipsec1, if_id: 1, table: 220}", "[0.0.0.0/0]", ""},
		{"rule_priority without a table", "{name: ipsec1, if_id: 1, rule_priority: 220}", "[10.4.0.0/24]",
			"interfaces[0].rule_priority: needs the interface's table, a routing table of its own for the rule to look up (table: 220)"},
		{"rule_priority after main's rule", "{name: ipsec1, if_id: 1, table: 220, rule_priority: 32766}", "[10.4.0.0/24]", "interfaces[0].rule_priority"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := strings.Replace(base, "{name: ipsec1, if_id: 1}", tt.iface, 1)
			cfg = strings.Replace(cfg, "remote_ts: [10.4.0.0/24]", "remote_ts: "+tt.remoteTS, 1)
			c, err := Parse(filepath.Join(t.TempDir(), "x.yaml"), []byte(cfg))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("got error %v, want one holding %q", err, tt.want)
			case tt.want == "" && strings.Contains(tt.iface, "rule_priority") && c.Interfaces[0].RulePriority != 220:
				t.Errorf("rule_priority: got %d, want 220", c.Interfaces[0].RulePriority)
			}
		})
	}
}
