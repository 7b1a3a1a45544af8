package hscost

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMediansTable: per proposal and responder the median of the rounds'
// figures, and ipsecd's ratios to charon's row of the same proposal.
func TestMediansTable(t *testing.T) {
	ms := time.Millisecond
	var samples []Sample
	for _, round := range []time.Duration{3, 1, 2} {
		samples = append(samples,
			Sample{Responder: "ipsecd", Proposal: "x", CPUPerSA: round * ms, Median: 2 * round * ms},
			Sample{Responder: "charon", Proposal: "x", CPUPerSA: 4 * round * ms, Median: 4 * round * ms})
	}
	rows := Medians(samples)
	if len(rows) != 2 || rows[0].CPUPerSA != 2*ms || rows[0].Median != 4*ms || rows[1].CPUPerSA != 8*ms || rows[0].Rounds != 3 {
		t.Fatalf("Medians = %+v", rows)
	}
	tab := Table(rows)
	if !strings.Contains(tab, "| x | ipsecd | 3 | 2.00 | 4.00 | 0.25 | 0.50 |") || !strings.Contains(tab, "| x | charon | 3 | 8.00 | 8.00 | – | – |") {
		t.Errorf("Table:\n%s", tab)
	}
}

// TestAppendLoad: the samples come back as written, in order.
func TestAppendLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	in := []Sample{{Responder: "ipsecd", Proposal: "a", N: 3, CPUPerSA: time.Millisecond}, {Responder: "charon", Proposal: "a", N: 3, Max: time.Second}}
	for _, s := range in {
		if err := Append(path, s); err != nil {
			t.Fatal(err)
		}
	}
	out, err := Load(path)
	if err != nil || len(out) != 2 || out[0] != in[0] || out[1] != in[1] {
		t.Fatalf("Load = %+v, %v", out, err)
	}
}

// TestCPUTime: our own process has used some CPU, and a missing process
// is an error.
func TestCPUTime(t *testing.T) {
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
	}
	if d, err := CPUTime(os.Getpid()); err != nil || d <= 0 {
		t.Errorf("CPUTime(self) = %v, %v", d, err)
	}
	if _, err := CPUTime(1 << 30); err == nil {
		t.Error("CPUTime of no process: no error")
	}
}
