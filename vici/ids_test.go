package vici

import (
	"testing"
	"time"
)

// Every client's copy of a down event names the SA by the id it had;
// ids of SAs gone are forgotten forgetAfter later, so that a daemon
// whose SAs come and go for days keeps only those of the last moments.
func TestIDsOfSAsGone(t *testing.T) {
	var u uniqueIDs
	t0 := time.Unix(1000, 0)
	a := u.ikeID("aaaa", "192.0.2.2", t0)
	b := u.ikeID("bbbb", "192.0.2.2", t0)
	if a != 1 || b != 2 {
		t.Fatalf("ids %d, %d; want 1, 2 in order", a, b)
	}
	u.forgetIKE("aaaa", "192.0.2.2", t0)
	// A second client translating the same down event a moment later.
	if got := u.ikeID("aaaa", "192.0.2.2", t0.Add(time.Second)); got != a {
		t.Errorf("id after the down event: %d, want %d", got, a)
	}
	u.forgetIKE("aaaa", "192.0.2.2", t0.Add(time.Second))
	// 10,000 SAs come and go; only those of the last forgetAfter stay.
	for i := range 10000 {
		at := t0.Add(time.Duration(i) * 10 * time.Millisecond)
		spi := string(rune('a'+i%26)) + time.Duration(i).String()
		u.ikeID(spi, "192.0.2.3", at)
		u.forgetIKE(spi, "192.0.2.3", at)
	}
	if n := u.size(); n > 3001+1 {
		t.Errorf("%d ids kept after 10,000 SAs came and went over 100 s; want those of the last 30 s (3,000) and b", n)
	}
	if got := u.ikeID("bbbb", "192.0.2.2", t0.Add(200*time.Second)); got != b {
		t.Errorf("the SA still up lost its id: %d, want %d", got, b)
	}
}
