package datapath

import (
	"testing"
	"time"
)

// TestBackoffPause: the first 16 failures in a row are free, then the
// pauses double from 1 ms up to 64 ms; a success starts again.
func TestBackoffPause(t *testing.T) {
	tests := []struct {
		failures int
		want     time.Duration
	}{
		{0, 0}, {1, 0}, {16, 0},
		{17, time.Millisecond}, {18, 2 * time.Millisecond}, {22, 32 * time.Millisecond},
		{23, 64 * time.Millisecond}, {24, 64 * time.Millisecond}, {1000, 64 * time.Millisecond},
	}
	for _, tt := range tests {
		b := backoff{failures: tt.failures}
		if got := b.pause(); got != tt.want {
			t.Errorf("pause after %d failures = %v, want %v", tt.failures, got, tt.want)
		}
	}
	b := backoff{failures: 30}
	b.reset()
	if got := b.pause(); got != 0 {
		t.Errorf("pause after reset = %v, want 0", got)
	}
}

// TestBatchBuffers: each buffer is its own size and capacity, so that an
// append within one cannot reach the next.
func TestBatchBuffers(t *testing.T) {
	bufs, free := batchBuffers(3, 100)
	defer free()
	if len(bufs) != 3 {
		t.Fatalf("%d buffers, want 3", len(bufs))
	}
	for i, b := range bufs {
		if len(b) != 100 || cap(b) != 100 {
			t.Errorf("buffer %d: len %d cap %d, want 100 and 100", i, len(b), cap(b))
		}
	}
	_ = append(bufs[0], 0xff)
	if bufs[1][0] != 0 {
		t.Error("an append to buffer 0 wrote into buffer 1")
	}
}
