package main

import "strings"

// keptHeading starts the part of benchmark.md that the bench does not
// measure and keeps as it is when it rewrites the file: the remote-access
// figures, measured by integration's TestRAScale.
const keptHeading = "\n## Remote access at scale\n"

// keptPart returns the part of old (the file's previous content) from
// keptHeading to its end, or "" when it has none.
func keptPart(old string) string {
	if i := strings.Index(old, keptHeading); i >= 0 {
		return old[i:]
	}
	return ""
}
