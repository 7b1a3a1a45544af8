package vici

import (
	"testing"

	"github.com/ipsecd/ipsecd/config"
)

// TestConnSectionUnique: list-conn names each uniqueness policy as charon
// 5.9 does (UNIQUE_NO for a connection without one).
func TestConnSectionUnique(t *testing.T) {
	for u, want := range map[config.Unique]string{"": "UNIQUE_NO", config.UniqueNo: "UNIQUE_NO", config.UniqueNever: "UNIQUE_NEVER",
		config.UniqueKeep: "UNIQUE_KEEP", config.UniqueReplace: "UNIQUE_REPLACE"} {
		if got := connSection(config.Connection{Unique: u}).String("unique"); got != want {
			t.Errorf("unique %q listed as %q; want %s", u, got, want)
		}
	}
}
