package datapath

import "golang.org/x/sys/unix"

// newSlab returns size bytes of zeroed memory mapped outside the Go heap,
// and the function that unmaps it: a worker's batch buffers (128 packets
// of up to 64 KiB, 8 MiB a socket or queue), which hold no pointers.
//
// In the heap they counted as live memory for the garbage collector,
// whose goal is twice the live heap (GOGC=100): 16 MiB of a gateway's two
// receive sockets let another 16 MiB of garbage pile up before each
// collection, which showed as resident memory of every IKE handshake
// (docs/benchmark.md, remote access). Mapped, they are not the
// collector's, and a page no packet was ever read into is not resident.
// When the mapping fails, the slab comes from the heap.
//
// The memory must not be touched once free ran: the worker frees it
// after its loop returned and no helper holds a packet of it.
func newSlab(size int) (mem []byte, free func()) {
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return make([]byte, size), func() {}
	}
	return mem, func() { unix.Munmap(mem) }
}
