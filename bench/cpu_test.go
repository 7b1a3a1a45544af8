package main

import (
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	// A real line (cat's), utime 7 and stime 3 ticks.
	const cat = "17111 (cat) R 17108 17108 12376 0 -1 4194304 99 0 0 0 7 3 0 0 20 0 1 0 1209950 3133440 383 18446744073709551615 94765076537344 0 0 0 17 1 0 0 0 0 0\n"
	tests := []struct {
		name, stat string
		want       time.Duration
		err        string
	}{
		{"cat", cat, 100 * time.Millisecond, ""},
		// A command name may hold spaces and ")": count from the last.
		{"name with spaces and parens", strings.Replace(cat, "(cat)", "(a) b (c) d)", 1), 100 * time.Millisecond, ""},
		{"large", "1 (x) S 0 0 0 0 -1 0 0 0 0 0 360000 12345 0 0\n", 3723450 * time.Millisecond, ""},
		{"no parenthesis", "1 x S 0 0 0 0 -1 0 0 0 0 0 7 3 0 0", 0, "no \")\""},
		{"truncated", "1 (x) S 0 0 0 0 -1 0 0 0 0 0 7", 0, "fields after the command name"},
		{"not a number", "1 (x) S 0 0 0 0 -1 0 0 0 0 0 7 x3 0 0", 0, "field 15"},
		{"negative", "1 (x) S 0 0 0 0 -1 0 0 0 0 0 -7 3 0 0", 0, "field 14"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseProcStat(tt.stat)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %v, %v; want an error with %q", got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// procCPU reads this very process, and sees it spend CPU.
func TestProcCPUSelf(t *testing.T) {
	before, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Spin for a few clock ticks of CPU, bounded in wall time for a busy
	// machine.
	deadline := time.Now().Add(5 * time.Second)
	x := 1.0
	for {
		for range 1_000_000 {
			x = math.Sqrt(x + 1)
		}
		now, err := procCPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if now >= before+3*clockTick {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPU time went from %v to %v in 5 s of spinning (x=%v)", before, now, x)
		}
	}
	if _, err := procCPU(-1); err == nil {
		t.Error("procCPU(-1): no error")
	}
}

func TestCPUSpent(t *testing.T) {
	start := cpuSnapshot{10: 2 * time.Second, 20: 5 * time.Second}
	got, err := cpuSpent(start, cpuSnapshot{10: 3500 * time.Millisecond, 20: 6 * time.Second, 30: time.Hour})
	if err != nil || got != 2500*time.Millisecond {
		t.Errorf("both ends: got %v, %v; want 2.5s (a process only in the end sample does not count)", got, err)
	}
	if _, err := cpuSpent(start, cpuSnapshot{10: 3 * time.Second}); err == nil {
		t.Error("a process without an end sample: no error")
	}
	if _, err := cpuSpent(start, cpuSnapshot{10: time.Second, 20: 6 * time.Second}); err == nil {
		t.Error("CPU time going back: no error")
	}
}

func TestCPUPerGB(t *testing.T) {
	tests := []struct {
		cpu   time.Duration
		bytes uint64
		want  float64
	}{
		{2360 * time.Millisecond, 1e9, 2.36},
		{5 * time.Second, 2_500_000_000, 2},
		// 6.25 GB in a 10 s run at 5 Gbit/s, 14.75 s of CPU.
		{14750 * time.Millisecond, 6_250_000_000, 2.36},
		{time.Second, 0, 0},
	}
	for _, tt := range tests {
		if got := cpuPerGB(tt.cpu, tt.bytes); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("cpuPerGB(%v, %d) = %v, want %v", tt.cpu, tt.bytes, got, tt.want)
		}
	}
	if _, ok := (measurement{cpu: time.Second, bytes: 1e9}).cpuPerGB(); ok {
		t.Error("measurement without cpuOK has a CPU figure")
	}
	if _, ok := (measurement{cpu: time.Second, cpuOK: true}).cpuPerGB(); ok {
		t.Error("measurement without bytes has a CPU figure")
	}
}

// The table's CPU columns and the Line rate II CPU target from rows.
func TestReportCPU(t *testing.T) {
	r := &report{o: options{ifaces: 1000, sas: 1000}}
	r.add(row{name: "veth", streams: 1, m: measurement{bitsPerSecond: 40e9, bytes: 50e9}})
	r.add(row{name: "wireguard-go", streams: 1, m: measurement{bitsPerSecond: 2.5e9, bytes: 3.125e9, cpu: 15 * time.Second, cpuOK: true}})
	r.add(row{name: "ipsecd AES-GCM-128", streams: 1, m: measurement{bitsPerSecond: 10e9, bytes: 12.5e9, cpu: 15 * time.Second, cpuOK: true}})
	r.add(row{name: "strongSwan kernel-libipsec", streams: 1, err: errors.New("no")})

	table := r.tableMarkdown()
	for _, want := range []string{
		"| veth | 1 | 40.000 | 16.00 | 1.00 | – | – | – |",
		// 15 s / 3.125 GB = 4.8 s/GB
		"| wireguard-go | 1 | 2.500 | 1.00 | 0.06 | – | 4.80 | 1.00 |",
		// 15 s / 12.5 GB = 1.2 s/GB, a quarter of wireguard-go's
		"| ipsecd AES-GCM-128 | 1 | 10.000 | 4.00 | 0.25 | – | 1.20 | 0.25 |",
		"| strongSwan kernel-libipsec | 1 | failed | – | – | – | – | – |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}

	ts := r.lineRate2()
	want := []struct {
		value float64
		pass  bool
	}{{0.25, true}, {4, true}, {0.25, true}}
	if len(ts) < len(want) {
		t.Fatalf("%d Line rate II targets, want at least %d", len(ts), len(want))
	}
	for i, w := range want {
		if !ts[i].ok || math.Abs(ts[i].value-w.value) > 1e-9 || ts[i].pass != w.pass {
			t.Errorf("%s: got %v (ok %v, pass %v), want %v (pass %v)", ts[i].name, ts[i].value, ts[i].ok, ts[i].pass, w.value, w.pass)
		}
	}
	if got := targetsTable(ts); !strings.Contains(got, "| 0.250 | <= 0.30 | pass (1.20 against 4.80 CPU-s/GB) |") {
		t.Errorf("targets table:\n%s", got)
	}
}

func TestBusyNote(t *testing.T) {
	quiet := &report{env: [][2]string{{"load average at start (1, 5, 15 min)", "0.00 0.10 0.20"}}}
	if n := quiet.busyNote(); n != "" {
		t.Errorf("idle machine: %q", n)
	}
	busy := &report{env: [][2]string{
		{"load average at start (1, 5, 15 min)", "0.50 1.00 1.00"},
		{"load average at end (1, 5, 15 min)", "1000.40 9.00 9.00"},
	}}
	if n := busy.busyNote(); !strings.Contains(n, "up to\n1000.4 on") {
		t.Errorf("busy machine: %q", n)
	}
}
