package ike

import (
	"errors"
	"testing"
	"time"
)

// TestDefaultRetransmit: a Config whose Retransmit is zero runs
// DefaultRetransmit, strongSwan's schedule (docs/config.md, docs/ike.md):
// an unanswered IKE_SA_INIT is sent again after 4 s, then 4 s * 1.8^n,
// 5 times, and the SA then fails with ErrTimeout. The config file's
// default is the same value (config refers to DefaultRetransmit).
func TestDefaultRetransmit(t *testing.T) {
	if want := (Retransmit{Timeout: 4 * time.Second, Base: 1.8, Tries: 5}); DefaultRetransmit != want {
		t.Fatalf("DefaultRetransmit is %+v, want strongSwan's %+v", DefaultRetransmit, want)
	}
	ci, _ := pairConfigs(t, []string{"aes128gcm16-prfsha256-x25519"}, []string{"aes128gcm16"})
	ci.Retransmit = Retransmit{}
	s, _, err := Initiate(ci, addrA, addrB, t0)
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{4 * time.Second, 7200 * time.Millisecond, 12960 * time.Millisecond,
		23328 * time.Millisecond, 41990400 * time.Microsecond, 75582720 * time.Microsecond}
	var got []time.Duration
	prev := t0
	for i := 0; i < 10 && !s.NextTimeout().IsZero(); i++ {
		next := s.NextTimeout()
		got = append(got, next.Sub(prev))
		prev = next
		out, err := s.Tick(next)
		if err != nil {
			if !errors.Is(err, ErrTimeout) || out != nil {
				t.Fatalf("after %d waits: %v, %d bytes; want ErrTimeout and nothing to send", len(got), err, len(out))
			}
			break
		}
		if out == nil {
			t.Fatalf("wait %d (%v): nothing sent", len(got), got[len(got)-1])
		}
	}
	if len(got) != len(want) {
		t.Fatalf("waits %v, want %v", got, want)
	}
	for i := range want {
		// math.Pow may be off by a few nanoseconds.
		if d := got[i] - want[i]; d < -time.Microsecond || d > time.Microsecond {
			t.Fatalf("waits %v, want %v", got, want)
		}
	}
}
