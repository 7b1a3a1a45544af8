package tun

import (
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// gatherWriter writes one packet gathered from several buffers with one
// writev(2) on a queue's descriptor: the TUN takes the parts as one
// frame, virtio-net header first. The receive path gives it a TCP
// super-packet as its first segment and the payloads of the others
// (package internal/gro), so that nothing copies the payloads together
// in user space. Its zero value is ready; it allocates its iovecs on
// first use (and again only for a frame of more parts than ever).
type gatherWriter struct {
	// mu guards: rc, iov, written, errno (a write in flight).
	mu      sync.Mutex
	rc      syscall.RawConn
	fn      func(fd uintptr) bool // writeOnce as a func value, made once
	iov     []unix.Iovec
	written int
	errno   unix.Errno
}

// minIovecs is the iovecs allocated at first use: a 64 KiB super-packet of
// 1,400-byte segments is 47 parts.
const minIovecs = 64

// write writes parts, the frame's pieces in order, to f with one writev.
func (w *gatherWriter) write(f *os.File, parts [][]byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rc == nil {
		rc, err := f.SyscallConn()
		if err != nil {
			return err
		}
		w.rc, w.fn = rc, w.writeOnce
	}
	if cap(w.iov) < len(parts) {
		w.iov = make([]unix.Iovec, 0, max(len(parts), minIovecs))
	}
	w.iov = w.iov[:0]
	for _, p := range parts {
		if len(p) == 0 {
			continue
		}
		v := unix.Iovec{Base: &p[0]}
		v.SetLen(len(p))
		w.iov = append(w.iov, v)
	}
	if len(w.iov) == 0 {
		return nil
	}
	w.written, w.errno = 0, 0
	err := w.rc.Write(w.fn)
	clear(w.iov) // the caller keeps its buffers
	if err != nil {
		return err
	}
	if w.errno != 0 {
		return os.NewSyscallError("writev", w.errno)
	}
	return nil
}

// writeOnce is the poller's callback: false asks it to wait until the
// descriptor is writable.
func (w *gatherWriter) writeOnce(fd uintptr) bool {
	for {
		n, errno := writev(fd, w.iov)
		switch errno {
		case 0:
			w.written = n
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		w.errno = errno
		return true
	}
}

// WriteGather writes one packet gathered from parts (a virtio-net header
// and the packet, in pieces) in one write, making an idle queue active
// first. The caller keeps the buffers. A queue's Write and WriteGather
// may be called from several goroutines; each frame is written whole.
// Once the queue is closed the error matches os.ErrClosed.
func (q *queue) WriteGather(parts [][]byte) error {
	a := q.dev.Load()
	if a == nil {
		if err := q.activate(); err != nil {
			return err
		}
		a = q.dev.Load()
	}
	err := a.gather.write(a.File(), parts)
	if err != nil && q.isClosed() {
		// The poller says "use of closed file", which is not
		// os.ErrClosed as the File's own Write would say.
		return os.ErrClosed
	}
	return err
}

func (q *queue) isClosed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}
