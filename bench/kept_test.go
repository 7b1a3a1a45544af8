package main

import "testing"

// TestKeptPart: a rewrite keeps the hand-measured section, heading
// included, and nothing else of the old file.
func TestKeptPart(t *testing.T) {
	old := "# ipsecd benchmark\n\n## Throughput\n\nold rows\n\n## Remote access at scale\n\n| a | b |\n"
	if got, want := keptPart(old), "\n## Remote access at scale\n\n| a | b |\n"; got != want {
		t.Errorf("keptPart = %q, want %q", got, want)
	}
	if got := keptPart("# ipsecd benchmark\n\n## Throughput\n"); got != "" {
		t.Errorf("keptPart of a file without the section = %q, want none", got)
	}
}
