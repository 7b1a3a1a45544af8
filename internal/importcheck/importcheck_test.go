package importcheck

import (
	"slices"
	"testing"
)

// TestChains: the shortest chain to each forbidden package, a package
// under a forbidden path included, and nothing for one only named alike.
func TestChains(t *testing.T) {
	imports := map[string][]string{
		"m/stack":  {"m/node", "m/config"},
		"m/node":   {"m/sa", "m/config"},
		"m/config": {"m/ike", "yaml"},
		"m/ike":    {"m/ike/dh"},
		"m/sa":     {"m/ikex"},
	}
	got := Chains("m/stack", imports, []string{"m/config", "m/ike"})
	want := [][]string{
		{"m/stack", "m/config"},
		{"m/stack", "m/config", "m/ike"},
		{"m/stack", "m/config", "m/ike", "m/ike/dh"},
	}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("Chains = %q, want %q", got, want)
	}
}
