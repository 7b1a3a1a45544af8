// Package printable escapes text that came from outside (a peer's
// identity, a certificate's names) before a terminal, a log or a
// listing shows it: a control character in it must not move the cursor,
// clear the screen or start a line that looks like one of ours.
//
// Escape is the one escaping function: the IKE engine applies it where
// it formats a peer's identity, and the command line applies it again
// to what it prints (it changes nothing the second time). Safe for
// concurrent use.
package printable

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape returns s with what is not printable text written as a Go
// escape: an ASCII control character (CR, LF, ESC, tab, DEL, ...) or a
// byte that is not UTF-8 as \xNN, any other rune that is not graphic (C1
// controls, line and paragraph separators, bidirectional overrides,
// zero-width characters) as \uNNNN. Printable text stays as it is, UTF-8
// letters and backslashes included, so that escaping twice is escaping
// once. It allocates only when something is escaped.
func Escape(s string) string {
	if IsPrintable(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < utf8.RuneSelf && !printableRune(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case !printableRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// IsPrintable reports whether Escape leaves s as it is.
func IsPrintable(s string) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 || !printableRune(r) {
			return false
		}
		i += n
	}
	return true
}

// printableRune: a graphic rune (letters, marks, numbers, punctuation,
// symbols, spaces). Format characters (Cf: bidirectional overrides,
// zero-width ones), which could hide or reorder what follows, are not
// graphic.
func printableRune(r rune) bool {
	if r < utf8.RuneSelf {
		return r >= 0x20 && r < 0x7f
	}
	return unicode.IsGraphic(r)
}
