// Package hint words the hints that error messages give a person: the
// choices there are ("a, b or c") and the closest of them to a misspelt
// name ("did you mean b?"). The config file, sa's checks and the command
// line word their messages with it, so that one mistake reads the same
// wherever it is made.
package hint

import (
	"fmt"
	"strings"
)

// OrList joins "a", "a or b", "a, b or c".
func OrList[T any](xs []T) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	if len(s) <= 1 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// Closest returns the one of known closest to a misspelt name, or "" when
// none is close: the same but for case, '-' and '_', a prefix of at least
// 4 characters, or within an edit distance of 2 (3 for a name longer than
// 8).
func Closest(name string, known []string) string {
	norm := func(s string) string {
		return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(s))
	}
	best, bestDist := "", 3
	if len(name) > 8 {
		bestDist = 4
	}
	for _, k := range known {
		if norm(k) == norm(name) || (len(name) >= 4 && strings.HasPrefix(k, name)) {
			return k
		}
		if dist := editDistance(name, k); dist < bestDist {
			best, bestDist = k, dist
		}
	}
	return best
}

// editDistance is the Levenshtein distance of two short strings.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
