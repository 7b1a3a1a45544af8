package main

import "strings"

// keptHeading starts the part of benchmark.md that the bench does not
// measure and keeps as it is when it rewrites the file: the remote-access
// figures, measured by integration's TestRAScale.
const keptHeading = "\n## Remote access at scale\n"

// keptPart returns the part of old (the file's previous content) from
// the handshake section (written by -handshakes on its own) or else from
// keptHeading to its end, or "" when it has neither.
func keptPart(old string) string {
	for _, h := range []string{handshakeHeading, keptHeading} {
		if i := strings.Index(old, h); i >= 0 {
			return old[i:]
		}
	}
	return ""
}
