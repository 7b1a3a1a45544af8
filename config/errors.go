package config

import (
	"fmt"
	"sort"
	"strings"
)

// Error is one problem in a config file (or in a state or policy given on
// the command line or the control socket, where File and Line are empty).
type Error struct {
	File  string // the file name as given to Parse or Load
	Line  int    // 1-based; 0 when the problem has no line (an empty file)
	Field string // path of the field, as "states[1].aead.key"; may be empty
	Msg   string // what is wrong; never contains key material
}

// Error formats e as "FILE:LINE: field: what is wrong", leaving out the
// parts e does not have.
func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ErrorList is every problem found in one file, in line order. Parse and
// Load return one (as an error) when the file is refused; use errors.As to
// get at the individual errors.
type ErrorList []*Error

// Error returns the errors one per line.
func (l ErrorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.Is and errors.As look at each error.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// sortByLine orders l by line, keeping the order of errors on one line.
func (l ErrorList) sortByLine() {
	sort.SliceStable(l, func(i, j int) bool { return l[i].Line < l[j].Line })
}
