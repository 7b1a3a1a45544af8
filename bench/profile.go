package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// metricsAddr is where a profiled ipsecd serves its metrics and Go's
// profiler: loopback of its own namespace, so the two daemons do not
// collide and nothing outside the namespace reaches it.
const metricsAddr = "127.0.0.1:9187"

// profiledCase is the table case -profile takes CPU profiles of, with
// one stream, in an extra run after its rows so that the profiler's own
// cost is not in the table.
const profiledCase = "ipsecd AES-GCM-128"

// A daemon whose CPU profile can be taken: ipsecd with pprof on, its
// metrics listener at metricsAddr inside ns.
type profiledDaemon struct {
	ns    *netns
	label string // file name of the profile, without .pprof
	role  string // for the report: which end and what it does
}

// profiler takes CPU profiles of a path's profiled daemons into dir.
type profiler struct {
	dir string
}

// file is where the profile of t goes.
func (pr *profiler) file(t profiledDaemon) string { return filepath.Join(pr.dir, t.label+".pprof") }

// start asks each profiled daemon of p for a CPU profile of d and
// returns a channel that gets the outcome when all have been written.
func (pr *profiler) start(ctx context.Context, l *lab, p *path, d time.Duration) chan error {
	done := make(chan error, 1)
	if len(p.profiled) == 0 {
		done <- errors.New("the path has no profiled daemon")
		return done
	}
	go func() {
		var mu sync.Mutex
		var errs []error
		var wg sync.WaitGroup
		for _, t := range p.profiled {
			wg.Go(func() {
				url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%s", metricsAddr, seconds(d))
				_, err := output(t.ns.command(ctx, "curl", "-sS", "--fail", "-o", pr.file(t), url))
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", t.label, err))
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		done <- errors.Join(errs...)
	}()
	return done
}

// pprofTop is `go tool pprof -top` of a profile, its first n functions.
func pprofTop(ctx context.Context, root, file string, n int) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", fmt.Sprintf("-nodecount=%d", n), file)
	cmd.Dir = root
	out, err := output(cmd)
	return strings.TrimSpace(out), err
}
