package tun

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	wgtun "golang.zx2c4.com/wireguard/tun"
)

// offloadBatchSize is the batch size of a wireguard/tun queue with the
// virtio-net header, which every queue has (conn.IdealBatchSize).
const offloadBatchSize = 128

// queue is one TUN queue. Its offload machinery, a wireguard/tun device
// (a 64 KiB read buffer and TCP and UDP GRO tables: about 800 KiB of the
// heap), is made only when the queue first carries a packet, in either
// direction: until then the queue is a bare descriptor in the poller, so
// that thousands of mostly idle interfaces (an xfrm interface per peer)
// cost little. Offloads (TSO, USO, checksum) are switched on at the same
// moment; before that the kernel sends plain packets, which the device
// then reads as it reads any other.
//
// Read and Write of an active queue are an atomic load and the device's
// own call: no lock, no allocation.
type queue struct {
	dev atomic.Pointer[activeQueue] // nil while idle

	// mu guards: idle, fd, deadline, closed, and the change to active.
	mu       sync.Mutex
	idle     *os.File // the descriptor while idle, for waiting in the poller; nil once active or closed
	fd       int      // idle's descriptor (its Fd method would make it blocking)
	deadline time.Time
	closed   bool
}

type activeQueue struct {
	wgtun.Device
	gather gatherWriter // WriteGather's, the receive path's writes
}

// newIdleQueue takes ownership of fd, a non-blocking TUN queue.
func newIdleQueue(fd int) *queue {
	return &queue{idle: os.NewFile(uintptr(fd), cloneDevicePath), fd: fd}
}

// newActiveQueue wraps a device made at once (Options.Monitor).
func newActiveQueue(dev wgtun.Device) *queue {
	q := &queue{}
	q.dev.Store(&activeQueue{Device: dev})
	return q
}

// Read reads a batch of packets as wireguard/tun's Read does; an idle
// queue first waits for a packet (Wait).
func (q *queue) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	a := q.dev.Load()
	if a == nil {
		if err := q.Wait(); err != nil {
			return 0, err
		}
		a = q.dev.Load()
	}
	return a.Read(bufs, sizes, offset)
}

// Wait returns once the queue is active, making it active when a packet
// is there to read; or once the read deadline passes (an error matching
// os.ErrDeadlineExceeded) or the queue is closed (os.ErrClosed). A reader
// waits before it allocates its buffers, so that an idle queue costs its
// reader nothing either.
func (q *queue) Wait() error {
	if q.dev.Load() != nil {
		return nil
	}
	if err := q.waitReadable(); err != nil {
		if q.dev.Load() != nil {
			return nil // made active by a Write meanwhile
		}
		return err
	}
	return q.activate()
}

// waitReadable blocks in the poller until the idle descriptor is
// readable. It returns nil when the queue became active or closed
// meanwhile (activate then says which).
func (q *queue) waitReadable() error {
	q.mu.Lock()
	f := q.idle
	q.mu.Unlock()
	if f == nil {
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	err = rc.Read(func(fd uintptr) bool {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		_, err := unix.Poll(p, 0)
		// A deleted interface wakes its queues with POLLERR: that is no
		// traffic, and activating the queues of every interface a
		// shutdown removes would cost their offload memory at once. Such
		// a queue waits on for its Close (Device.Close comes right after
		// the deletion), which releases it.
		return err == nil && p[0].Revents&unix.POLLIN != 0
	})
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return err
	}
	// Readable, or closed under us: by activate (a Write made the queue
	// active) or by Close; activate tells them apart.
	return nil
}

// activate makes the queue's device if it has none: the device gets a
// duplicate of the idle descriptor, which is then closed, so the queue
// keeps one descriptor. It returns an error matching os.ErrClosed once
// the queue is closed.
func (q *queue) activate() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.dev.Load() != nil {
		return nil
	}
	if q.closed {
		return os.ErrClosed
	}
	fd, err := unix.FcntlInt(uintptr(q.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("tun: activate queue: %w", err)
	}
	// What wireguard/tun asks first (TUNGETIFF), asked here: past its
	// first step it owns fd through an *os.File whose finalizer closes
	// the number, so that a failure there must not close it again (a
	// later socket may have the number by then). A queue of a deleted
	// interface fails here, with EBADFD.
	if err := tunGetIff(fd); err != nil {
		unix.Close(fd)
		return fmt.Errorf("tun: activate queue: %w", err)
	}
	// Sets TUNSETOFFLOAD from IFF_VNET_HDR, as CreateTUN does.
	dev, _, err := wgtun.CreateUnmonitoredTUNFromFD(fd)
	if err != nil {
		return fmt.Errorf("tun: activate queue: %w", err)
	}
	if !q.deadline.IsZero() {
		dev.File().SetReadDeadline(q.deadline)
	}
	q.dev.Store(&activeQueue{Device: dev})
	// Releases a Read waiting in waitReadable, which finds the device.
	q.idle.Close()
	q.idle = nil
	return nil
}

// Write writes packets as wireguard/tun's Write does, making an idle
// queue active first.
func (q *queue) Write(bufs [][]byte, offset int) (int, error) {
	a := q.dev.Load()
	if a == nil {
		if err := q.activate(); err != nil {
			return 0, err
		}
		a = q.dev.Load()
	}
	return a.Write(bufs, offset)
}

// BatchSize is the largest batch Read returns and Write takes.
func (q *queue) BatchSize() int {
	if a := q.dev.Load(); a != nil {
		return a.BatchSize()
	}
	return offloadBatchSize
}

// active reports whether the queue has its offload machinery.
func (q *queue) active() bool { return q.dev.Load() != nil }

// SetReadDeadline makes a blocked or later Read return an error matching
// os.ErrDeadlineExceeded once t has passed; the zero time removes it.
func (q *queue) SetReadDeadline(t time.Time) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return os.ErrClosed
	}
	q.deadline = t
	if a := q.dev.Load(); a != nil {
		return a.File().SetReadDeadline(t)
	}
	return q.idle.SetReadDeadline(t)
}

// Close closes the queue's descriptor; blocked reads return an error
// matching os.ErrClosed.
func (q *queue) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil
	}
	q.closed = true
	if a := q.dev.Load(); a != nil {
		return a.Close()
	}
	err := q.idle.Close()
	q.idle = nil
	return err
}

// tunGetIff asks the kernel which interface the queue fd is attached to.
func tunGetIff(fd int) error {
	ifr, err := unix.NewIfreq("")
	if err != nil {
		return err
	}
	return unix.IoctlIfreq(fd, unix.TUNGETIFF, ifr)
}
