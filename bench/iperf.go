package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

const iperfPort = "5201"

// measurement is one iperf3 run through a path.
type measurement struct {
	bitsPerSecond float64 // as received, all streams, omitted seconds excluded
	retransmits   int
	// rss and hwm are the largest VmRSS seen while the run lasted and the
	// largest VmHWM at its end, over the path's ipsecd processes; 0 for
	// paths without one.
	rss, hwm uint64 // bytes
	// bytes is what iperf3 received in the counted seconds; cpu is the
	// CPU time (user + system) the path's tunnel processes, both ends,
	// spent from the end of the warm-up to the end of the run. cpuOK is
	// false for paths without tunnel processes (veth) or when a sample
	// failed.
	bytes uint64
	cpu   time.Duration
	cpuOK bool
}

func (m measurement) gbps() float64 { return m.bitsPerSecond / 1e9 }

// cpuPerGB is the tunnel's CPU-seconds per 10^9 bytes moved, and whether
// it was measured.
func (m measurement) cpuPerGB() (float64, bool) {
	if !m.cpuOK || m.bytes == 0 {
		return 0, false
	}
	return cpuPerGB(m.cpu, m.bytes), true
}

// iperfResult is the part of `iperf3 -J` output the benchmark reads.
type iperfResult struct {
	End struct {
		SumSent struct {
			Retransmits int `json:"retransmits"`
		} `json:"sum_sent"`
		SumReceived struct {
			BitsPerSecond float64 `json:"bits_per_second"`
			Bytes         uint64  `json:"bytes"`
		} `json:"sum_received"`
	} `json:"end"`
	Error string `json:"error"`
}

// measure runs a one-off iperf3 server in B and a TCP client in A sending
// to p.target with the given number of parallel streams for d (after
// omit seconds of warm-up that do not count). It samples the memory of
// p's daemons while the client runs, and the CPU time of p's tunnel
// processes when the warm-up ends and when the client is done. With prof,
// it also takes CPU profiles of p's profiled daemons over the counted
// seconds.
func measure(ctx context.Context, l *lab, p *path, streams int, d, omit time.Duration, prof *profiler) (measurement, error) {
	var m measurement
	srv, err := l.start(l.b, "iperf3-server", nil, "iperf3", "-s", "-1", "-p", iperfPort)
	if err != nil {
		return m, err
	}
	defer l.remove(srv)
	if err := waitFor(ctx, 10*time.Second, "iperf3 server", func() bool {
		out, err := l.b.output(ctx, "ss", "-Hltn", "sport = :"+iperfPort)
		return err == nil && strings.TrimSpace(out) != ""
	}); err != nil {
		return m, fmt.Errorf("%w\n%s", err, srv.logTail(5))
	}

	sampler := startSampler(p.daemons)
	cctx, cancel := context.WithTimeout(ctx, d+omit+30*time.Second)
	defer cancel()
	cmd := l.a.command(cctx, "iperf3", "-c", p.target, "-p", iperfPort, "-J",
		"-t", seconds(d), "-O", seconds(omit), "-P", fmt.Sprint(streams), "--connect-timeout", "5000")
	// The first CPU sample when iperf3's warm-up ends, the last when the
	// client has exited: only these two, so that sampling costs the
	// tunnels nothing in between. The client's few milliseconds of
	// connecting before the warm-up and of reporting after it are
	// counted, and are idle time for the tunnels.
	var cpu0 cpuSnapshot
	var cpu0Err error
	var profErr chan error
	started := make(chan struct{})
	timer := time.AfterFunc(omit, func() {
		defer close(started)
		cpu0, cpu0Err = snapshotCPU(p.tunnel)
		if prof != nil {
			profErr = prof.start(cctx, l, p, d)
		}
	})
	out, runErr := cmd.Output()
	cpu1, cpu1Err := snapshotCPU(p.tunnel)
	if timer.Stop() {
		cpu0Err = errors.New("iperf3 ended before its warm-up did")
	} else {
		<-started
	}
	m.rss, m.hwm = sampler.stop()
	if len(p.tunnel) != 0 {
		m.cpu, m.cpuOK = 0, false
		if err := errors.Join(cpu0Err, cpu1Err); err != nil {
			fmt.Printf("  CPU time not measured: %v\n", err)
		} else if spent, err := cpuSpent(cpu0, cpu1); err != nil {
			fmt.Printf("  CPU time not measured: %v\n", err)
		} else {
			m.cpu, m.cpuOK = spent, true
		}
	}
	if profErr != nil {
		if err := <-profErr; err != nil {
			fmt.Printf("  profile not taken: %v\n", err)
		}
	}

	var res iperfResult
	if err := json.Unmarshal(out, &res); err != nil {
		if runErr == nil {
			runErr = err
		}
		var ee *exec.ExitError
		if errors.As(runErr, &ee) {
			runErr = fmt.Errorf("%w: %s", runErr, bytes.TrimSpace(ee.Stderr))
		}
		return m, fmt.Errorf("iperf3 -c %s -P %d: %w", p.target, streams, runErr)
	}
	if res.Error != "" {
		return m, fmt.Errorf("iperf3 -c %s -P %d: %s", p.target, streams, res.Error)
	}
	if runErr != nil {
		return m, fmt.Errorf("iperf3 -c %s -P %d: %w", p.target, streams, runErr)
	}
	if res.End.SumReceived.BitsPerSecond <= 0 {
		return m, errors.New("iperf3 reported no data received")
	}
	m.bitsPerSecond = res.End.SumReceived.BitsPerSecond
	m.bytes = res.End.SumReceived.Bytes
	m.retransmits = res.End.SumSent.Retransmits
	for _, dm := range p.daemons {
		if done, err := dm.exited(); done {
			return m, fmt.Errorf("%s exited during the run: %v\n%s", dm.name, err, dm.logTail(20))
		}
	}
	return m, nil
}

// seconds formats d as whole seconds for iperf3 (-t and -O take integers).
func seconds(d time.Duration) string {
	return fmt.Sprint(int((d + time.Second - 1) / time.Second))
}

// sampler polls the VmRSS of some processes every 200 ms.
type sampler struct {
	procs []*process
	quit  chan struct{}
	wg    sync.WaitGroup
	rss   uint64 // largest VmRSS seen, bytes
}

func startSampler(procs []*process) *sampler {
	s := &sampler{procs: procs, quit: make(chan struct{})}
	if len(procs) == 0 {
		return s
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			for _, p := range s.procs {
				if st, err := procStatus(p.pid()); err == nil {
					s.rss = max(s.rss, st["VmRSS"])
				}
			}
			select {
			case <-s.quit:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// stop ends the sampling and returns the largest VmRSS seen and the
// largest VmHWM (the peak RSS since start-up) of the processes now.
func (s *sampler) stop() (rss, hwm uint64) {
	close(s.quit)
	s.wg.Wait()
	for _, p := range s.procs {
		if st, err := procStatus(p.pid()); err == nil {
			hwm = max(hwm, st["VmHWM"])
		}
	}
	return s.rss, hwm
}

// procStatus returns the memory fields (Vm*, in bytes) of /proc/PID/status.
func procStatus(pid int) (map[string]uint64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st := map[string]uint64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var name string
		var kb uint64
		if _, err := fmt.Sscanf(sc.Text(), "%s %d kB", &name, &kb); err == nil && strings.HasPrefix(name, "Vm") {
			st[strings.TrimSuffix(name, ":")] = kb << 10
		}
	}
	return st, sc.Err()
}
