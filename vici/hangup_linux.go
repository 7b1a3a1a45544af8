package vici

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// hungUp reports whether c's peer closed its end: a peek at the socket
// (taking nothing from it, and not waiting) finds the end of the stream.
// A command that waits (initiate, terminate) asks it, so that a client
// gone does not hold its connection until the command's timeout.
func hungUp(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	raw.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		closed = n == 0 && err == nil
	})
	return closed
}
