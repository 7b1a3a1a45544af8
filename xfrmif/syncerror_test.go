package xfrmif

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
)

// TestSyncErrorCounts checks that when many interfaces fail, Sync's
// error names the first failing interface with its cause and counts the
// failures, in one line: the joined errors of 10,000 interfaces read as
// a list whose start (where it went wrong) scrolled away.
func TestSyncErrorCounts(t *testing.T) {
	const total, good = 1000, 10
	r := &Registry{Create: func(c Config) (*Interface, error) {
		if c.IfID > good {
			return nil, fmt.Errorf("xfrmif: %s: tun: open: %w", c.Name, syscall.EMFILE)
		}
		return NewInterface(c, newFakeLink(1))
	}}
	defer r.Close()
	var cfgs []Config
	for i := 1; i <= total; i++ {
		cfgs = append(cfgs, Config{Name: fmt.Sprintf("ipsec%d", i), IfID: uint32(i)})
	}
	_, err := r.Sync(cfgs)
	if err == nil {
		t.Fatal("Sync succeeded, want an error")
	}
	msg := err.Error()
	for _, want := range []string{
		fmt.Sprintf("%d of %d interfaces failed", total-good, total),
		fmt.Sprintf("ipsec%d: tun: open: too many open files", good+1),
		fmt.Sprintf("then ipsec%d, ipsec%d, ipsec%d and %d more", good+2, good+3, good+4, total-good-4),
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") || len(msg) > 300 {
		t.Errorf("error is %d bytes over %d lines, want one short line", len(msg), strings.Count(msg, "\n")+1)
	}
	var se *SyncError
	if !errors.As(err, &se) || len(se.Errs) != total-good || !errors.Is(err, syscall.EMFILE) {
		t.Errorf("error %T does not carry the %d failures and their cause", err, total-good)
	}
	if r.Len() != good {
		t.Errorf("%d interfaces published, want the %d that worked", r.Len(), good)
	}

	// One failure reads as itself.
	r2 := &Registry{Create: r.Create}
	defer r2.Close()
	_, err = r2.Sync(cfgs[good-1 : good+1])
	if want := fmt.Sprintf("xfrmif: ipsec%d: tun: open: too many open files", good+1); err == nil || err.Error() != want {
		t.Errorf("one failure: %v, want %q", err, want)
	}
}
