package proposal

import (
	"testing"

	"github.com/ipsecd/ipsecd/ike/dh"
	"github.com/ipsecd/ipsecd/ike/message"
)

// TestGroupsAreDH: the key exchange groups a proposal can name are
// exactly those package dh implements, by dh's numbers: a group parsed
// or chosen here is one dh.New runs, and none dh runs lacks a name.
func TestGroupsAreDH(t *testing.T) {
	for g := 0; g < 1<<16; g++ {
		a, named := ByTransform(message.Transform{Type: message.TransDH, ID: uint16(g)})
		if named != dh.Supported(uint16(g)) {
			t.Errorf("group %d: named %v (%q), dh implements it: %v", g, named, a.Name, dh.Supported(uint16(g)))
		}
	}
	if !MODP1024.IsLegacy() || MODP2048.IsLegacy() {
		t.Error("modp1024 alone is legacy")
	}
}
