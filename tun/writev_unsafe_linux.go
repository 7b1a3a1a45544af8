package tun

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// writev is writev(2) of iov (not empty) to fd, without the allocation of
// unix.Writev, which builds its own iovecs.
func writev(fd uintptr, iov []unix.Iovec) (int, unix.Errno) {
	n, _, errno := unix.Syscall(unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)))
	return int(n), errno
}
