package datapath

import (
	"runtime"
	"testing"
)

// TestBatchBuffersOutsideHeap: a worker's batch buffers (8 MiB for a
// receiving socket) do not count in the Go heap, where they would let as
// much garbage pile up before each collection; they hold what is written
// into them until freed.
func TestBatchBuffersOutsideHeap(t *testing.T) {
	const n, size = 128, 65535
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	bufs, free := batchBuffers(n, size)
	defer free()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > n*size/8 {
		t.Errorf("the heap grew %d bytes for %d buffers of %d, want the buffers outside it", grew, n, size)
	}
	for i, b := range bufs {
		if len(b) != size || cap(b) != size {
			t.Fatalf("buffer %d: len %d cap %d, want %d", i, len(b), cap(b), size)
		}
		b[0], b[size-1] = byte(i), byte(i>>1)
	}
	for i, b := range bufs {
		if b[0] != byte(i) || b[size-1] != byte(i>>1) {
			t.Fatalf("buffer %d lost what was written into it", i)
		}
	}
}
