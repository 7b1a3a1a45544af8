// Package blocktest proves, in a test, that a goroutine is blocked in a
// given function before the test releases it: a test that sleeps, closes
// and then sees the reader return passes as well when the reader never
// blocked (it returned early, or was not yet called).
package blocktest

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// Wait waits, up to 5 s, until a goroutine is parked (not running or
// runnable) with fn in its stack, and fails the test if none is. fn is
// part of a frame as runtime.Stack prints it: "(*endpoint).Read".
func Wait(t testing.TB, fn string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if Parked(fn) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no goroutine blocked in %s within 5 s", fn)
		}
		time.Sleep(time.Millisecond)
	}
}

// Parked reports whether a goroutine is parked with fn in its stack.
func Parked(fn string) bool {
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		if strings.Contains(header, "[running]") || strings.Contains(header, "[runnable]") {
			continue
		}
		if strings.Contains(g, fn) {
			return true
		}
	}
	return false
}
