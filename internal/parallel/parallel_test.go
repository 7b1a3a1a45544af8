package parallel

import (
	"sync/atomic"
	"testing"
)

// TestFor: every index runs exactly once, and never more than p at a time.
func TestFor(t *testing.T) {
	for _, c := range []struct{ n, p int }{{0, 4}, {1, 4}, {100, 1}, {100, 8}, {3, 8}} {
		seen := make([]atomic.Int32, c.n)
		var running, peak atomic.Int32
		For(c.n, c.p, func(i int) {
			r := running.Add(1)
			for {
				m := peak.Load()
				if r <= m || peak.CompareAndSwap(m, r) {
					break
				}
			}
			seen[i].Add(1)
			running.Add(-1)
		})
		for i := range seen {
			if got := seen[i].Load(); got != 1 {
				t.Errorf("n %d p %d: f(%d) ran %d times, want 1", c.n, c.p, i, got)
			}
		}
		if peak.Load() > int32(c.p) {
			t.Errorf("n %d p %d: %d at once, want at most %d", c.n, c.p, peak.Load(), c.p)
		}
	}
}
