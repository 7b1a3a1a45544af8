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

// TestKeptHandshakes: a rewrite keeps the handshake section with the
// remote-access one; -handshakes replaces only its own section, or puts
// it before the remote-access one.
func TestKeptHandshakes(t *testing.T) {
	old := "# b\n\n## Throughput\n\nrows\n" + handshakeHeading + "\nold table\n" + keptHeading + "\nra\n"
	if got, want := keptPart(old), handshakeHeading+"\nold table\n"+keptHeading+"\nra\n"; got != want {
		t.Errorf("keptPart = %q, want %q", got, want)
	}
	section := handshakeHeading + "\nnew table\n"
	if got, want := withSection(old, section), "# b\n\n## Throughput\n\nrows\n"+section+keptHeading+"\nra\n"; got != want {
		t.Errorf("withSection (replace) = %q, want %q", got, want)
	}
	if got, want := withSection("# b\n"+keptHeading+"\nra\n", section), "# b\n"+section+keptHeading+"\nra\n"; got != want {
		t.Errorf("withSection (insert) = %q, want %q", got, want)
	}
	if got, want := withSection("# b\n\nrows\n\n", section), "# b\n\nrows\n"+section; got != want {
		t.Errorf("withSection (append) = %q, want %q", got, want)
	}
}
