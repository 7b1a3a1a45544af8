package xfrmif

import (
	"fmt"
	"strings"
)

// SyncError is Sync's error when interfaces failed: it names the first
// failure in full and counts the rest, so that 9,000 failures of 10,000
// (a descriptor limit, say) read as one line that says where it started
// and how far it went, not as a list whose head scrolls away.
type SyncError struct {
	// Errs are the failures in the order of the config; each names its
	// interface.
	Errs []error
	// Names are the failed interfaces, in the same order.
	Names []string
	// Total is the number of interfaces Sync was given.
	Total int
}

// namesShown is how many further failed interfaces Error names.
const namesShown = 3

func (e *SyncError) Error() string {
	if len(e.Errs) == 1 {
		return e.Errs[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "xfrmif: %d of %d interfaces failed; the first: %v", len(e.Errs), e.Total, e.Errs[0])
	rest := e.Names[1:]
	if len(rest) > 0 {
		shown := rest[:min(len(rest), namesShown)]
		fmt.Fprintf(&b, "; then %s", strings.Join(shown, ", "))
		if more := len(rest) - len(shown); more > 0 {
			fmt.Fprintf(&b, " and %d more", more)
		}
	}
	return b.String()
}

// Unwrap returns every failure, for errors.Is and errors.As.
func (e *SyncError) Unwrap() []error { return e.Errs }

// add records the failure err of interface name.
func (e *SyncError) add(name string, err error) {
	if err != nil {
		e.Names = append(e.Names, name)
		e.Errs = append(e.Errs, err)
	}
}

// err is e, or nil when nothing failed.
func (e *SyncError) err() error {
	if len(e.Errs) == 0 {
		return nil
	}
	return e
}
