package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of utime and stime in /proc/PID/stat: USER_HZ,
// which is 100 on every Linux architecture Go supports (the kernel
// scales its own HZ to it for user space).
const clockTick = 10 * time.Millisecond

// procCPU returns the CPU time pid has used so far, user plus system, of
// all its threads (utime + stime of /proc/PID/stat; children that ended
// are not included, and the tunnels run none).
func procCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseProcStat(string(data))
}

// parseProcStat reads utime + stime from the text of /proc/PID/stat.
// The command name (field 2) is in parentheses and may itself hold
// spaces and parentheses, so the fields are counted from the last ")":
// after it come state (field 3) and so on, utime being field 14 and
// stime field 15 (proc(5)).
func parseProcStat(s string) (time.Duration, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("/proc/PID/stat: no \")\" after the command name")
	}
	f := strings.Fields(s[i+1:])
	const utime, stime = 14 - 3, 15 - 3 // indexes in f, which starts at field 3
	if len(f) <= stime {
		return 0, fmt.Errorf("/proc/PID/stat: %d fields after the command name, want at least %d", len(f), stime+1)
	}
	var total time.Duration
	for _, k := range []int{utime, stime} {
		ticks, err := strconv.ParseUint(f[k], 10, 63)
		if err != nil {
			return 0, fmt.Errorf("/proc/PID/stat: field %d: %v", k+3, err)
		}
		total += time.Duration(ticks) * clockTick
	}
	return total, nil
}

// cpuSnapshot is the CPU time of some processes at one moment.
type cpuSnapshot map[int]time.Duration // by PID

// snapshotCPU reads the CPU time of each of procs.
func snapshotCPU(procs []*process) (cpuSnapshot, error) {
	s := cpuSnapshot{}
	for _, p := range procs {
		d, err := procCPU(p.pid())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		s[p.pid()] = d
	}
	return s, nil
}

// cpuSpent is the CPU time the processes of start used between start and
// end, summed. A process missing from end (it exited) is an error: its
// time would be lost.
func cpuSpent(start, end cpuSnapshot) (time.Duration, error) {
	var total time.Duration
	for pid, t0 := range start {
		t1, ok := end[pid]
		if !ok {
			return 0, fmt.Errorf("process %d has no end sample", pid)
		}
		if t1 < t0 {
			return 0, fmt.Errorf("process %d: CPU time went back from %v to %v", pid, t0, t1)
		}
		total += t1 - t0
	}
	return total, nil
}

// cpuPerGB is CPU-seconds per gigabyte (10^9 bytes) moved: cpu spent
// while bytes went through. It is 0 when nothing was moved.
func cpuPerGB(cpu time.Duration, bytes uint64) float64 {
	if bytes == 0 {
		return 0
	}
	return cpu.Seconds() / (float64(bytes) / 1e9)
}
