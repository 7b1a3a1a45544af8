//go:build linux

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
)

// stallTick is how often awaitRunning looks at the clock; a tick more
// than stallGap late means this process was not running meanwhile.
const (
	stallTick = 100 * time.Millisecond
	stallGap  = time.Second
)

// awaitRunning waits for done for up to bound of the time this process
// ran, and at most limit in all, and returns what done gave and whether
// it came, with how long the waits stalled. A stall of the whole machine
// (a paused VM, a host that ran other guests: this process's ticks come
// seconds late) does not count against bound: the process waited for
// did not run either, and once both run again a timer of wall-clock time
// would be due already and win the race against its exit.
func awaitRunning(done <-chan error, bound, limit time.Duration) (err error, ok bool, stalled time.Duration) {
	tick := time.NewTicker(stallTick)
	defer tick.Stop()
	start, last := time.Now(), time.Now()
	var ran time.Duration
	for {
		select {
		case err := <-done:
			// done may win the select against the tick that would show a
			// stall just ended: count the gap since the last tick too.
			if gap := time.Since(last); gap > stallGap {
				stalled += gap - stallTick
			}
			return err, true, stalled
		case <-tick.C:
		}
		now := time.Now()
		gap := now.Sub(last)
		last = now
		if gap > stallGap {
			stalled += gap - stallTick
			gap = stallTick
		}
		ran += gap
		if ran > bound || now.Sub(start) > limit {
			return nil, false, stalled
		}
	}
}

// TestAwaitRunningStall: a helper that exits 0.5 s after it starts, and
// this process, are both stopped for 3 s from 0.2 s on (SIGSTOP, as a
// paused VM stops everything): waiting for the helper with a bound of 2 s of
// running time still sees it exit, and counts the stall. A wait on a
// wall-clock timer of 2 s lost that race.
func TestAwaitRunningStall(t *testing.T) {
	helper := exec.Command("sleep", "0.5")
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- helper.Wait() }()
	stopper := exec.Command("sh", "-c", `sleep 0.2; kill -STOP "$1" "$2"; sleep 3; kill -CONT "$2" "$1"`, "sh", fmt.Sprint(os.Getpid()), fmt.Sprint(helper.Process.Pid))
	if err := stopper.Start(); err != nil {
		helper.Process.Kill()
		t.Fatal(err)
	}
	t0 := time.Now()
	err, ok, stalled := awaitRunning(done, 2*time.Second, time.Minute)
	if err := stopper.Wait(); err != nil {
		t.Errorf("the stopper: %v", err)
	}
	if !ok {
		helper.Process.Kill()
		<-done
		t.Fatalf("the helper was not seen to exit within 2 s of running time (%v in all, %v of it stalled)", time.Since(t0), stalled)
	}
	if err != nil {
		t.Errorf("the helper: %v", err)
	}
	if stalled < 2*time.Second {
		t.Errorf("stalled %v, want the 3 s stop counted", stalled)
	}
	t.Logf("the helper exited after %v, %v of it stalled", time.Since(t0), stalled)
}
