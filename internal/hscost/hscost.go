// Package hscost measures what an IKE SA setup costs a responder: the
// responder's CPU time per IKE SA (from /proc/PID/stat) and the
// initiator's handshake time, over many handshakes one at a time. The
// integration test TestIKEHandshakeCostPQ takes the samples; the
// benchmark (go run ./bench -handshakes N) runs that test and writes
// their medians into docs/benchmark.md.
package hscost

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times (100 on Linux
// for every architecture Go supports).
const clockTicks = 100

// warmUp handshakes are not counted: the first ones page code in and
// fill caches.
const warmUp = 3

// CPUTime is the user and system time process pid has used.
func CPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name in parentheses may hold spaces: count fields
	// after its closing parenthesis (state is field 3, utime 14, stime 15).
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the command name, want at least 13", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := cmp.Or(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// Sample is one run of N handshakes against one responder.
type Sample struct {
	Responder string        // "ipsecd" or "charon"
	Proposal  string        // the IKE proposal, as swanctl writes it
	N         int           // handshakes counted
	Wall      time.Duration // for all N
	CPUPerSA  time.Duration // the responder's CPU time over N
	Median    time.Duration // of the handshake times
	P90, Max  time.Duration
}

func (s Sample) String() string {
	return fmt.Sprintf("%s responder, %s: %d handshakes in %v; handshake median %v, p90 %v, max %v; responder CPU %v per IKE SA",
		s.Responder, s.Proposal, s.N, s.Wall.Round(time.Millisecond), s.Median.Round(10*time.Microsecond),
		s.P90.Round(10*time.Microsecond), s.Max.Round(10*time.Microsecond), s.CPUPerSA.Round(10*time.Microsecond))
}

// Measure runs handshake warmUp times uncounted, then n times, and
// returns the sample, the CPU time that of process pid.
func Measure(responder, proposal string, n, pid int, handshake func() (time.Duration, error)) (Sample, error) {
	if n <= 0 {
		return Sample{}, fmt.Errorf("%d handshakes: want at least 1", n)
	}
	for i := 0; i < warmUp; i++ {
		if _, err := handshake(); err != nil {
			return Sample{}, fmt.Errorf("warm-up handshake %d: %w", i, err)
		}
	}
	before, err := CPUTime(pid)
	if err != nil {
		return Sample{}, err
	}
	begin := time.Now()
	took := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		d, err := handshake()
		if err != nil {
			return Sample{}, fmt.Errorf("handshake %d: %w", i, err)
		}
		took = append(took, d)
	}
	wall := time.Since(begin)
	after, err := CPUTime(pid)
	if err != nil {
		return Sample{}, err
	}
	slices.Sort(took)
	return Sample{Responder: responder, Proposal: proposal, N: n, Wall: wall, CPUPerSA: (after - before) / time.Duration(n),
		Median: took[n/2], P90: took[n*9/10], Max: took[n-1]}, nil
}

// Append adds s as a JSON line to the file at path (the test's results,
// which the benchmark reads back with Load).
func Append(path string, s Sample) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	return cmp.Or(err, f.Close())
}

// Load reads the samples Append wrote.
func Load(path string) ([]Sample, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []Sample
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var s Sample
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, i+1, err)
		}
		out = append(out, s)
	}
	return out, nil
}
