//go:build !linux

package datapath

// newSlab returns size bytes from the heap (slab_linux.go maps them
// outside it).
func newSlab(size int) (mem []byte, free func()) { return make([]byte, size), func() {} }
