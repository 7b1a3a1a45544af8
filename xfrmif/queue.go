package xfrmif

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// ErrNoDeadline is returned by SetReadDeadline for a queue that has no
// file to set a deadline on (a netstack link, a test double): only Close
// releases its blocked reads.
var ErrNoDeadline = errors.New("xfrmif: queue has no read deadline")

// QueueBatchSize is the largest batch queue q's Read returns: ReadQueue
// wants at least that many buffers.
func (ifc *Interface) QueueBatchSize(q int) int { return max(ifc.queues[q].BatchSize(), 1) }

// ReadQueue reads a batch of packets from queue q, as Queue.Read: packet i
// is bufs[i][offset:offset+sizes[i]]. offset must be at least MinOffset
// (the TUN reads its virtio-net header in front of the packet), and each
// buffer must hold offset plus the interface's MTU (MaxPacketSize with
// offloads off). What it reads is counted as tx. A failed read is counted
// as one tx error, and n packets may still have been read before it (a bad
// super-packet, or more segments than buffers). Once the interface is
// closed it returns an error matching ErrClosed; after a read deadline
// (SetReadDeadline), one matching os.ErrDeadlineExceeded.
//
// One goroutine reads a queue at a time; it keeps the buffers.
func (ifc *Interface) ReadQueue(q int, bufs [][]byte, sizes []int, offset int) (int, error) {
	if offset < MinOffset {
		return 0, fmt.Errorf("xfrmif: %s: read offset %d, want at least %d", ifc.name, offset, MinOffset)
	}
	s := &ifc.shards[q]
	n, err := ifc.queues[q].Read(bufs, sizes, offset)
	if err != nil {
		var ended bool
		if err, ended = ifc.readError(q, err); ended {
			return 0, err
		}
	}
	if n > 0 {
		var bytes uint64
		for _, size := range sizes[:n] {
			bytes += uint64(size)
		}
		s.txPackets.Add(uint64(n))
		s.txBytes.Add(bytes)
	}
	return n, err
}

// readError is what a failed read of queue q returns: ErrClosed once the
// interface is closed and a passed deadline as it is, both ending the
// read (ended); anything else counted as one tx error of the queue and
// named, with whatever the read got before it still valid.
func (ifc *Interface) readError(q int, err error) (_ error, ended bool) {
	switch {
	case errors.Is(err, os.ErrClosed) || ifc.closed.Load():
		return ErrClosed, true
	case errors.Is(err, os.ErrDeadlineExceeded):
		return err, true
	}
	ifc.shards[q].txErrors.Add(1)
	return fmt.Errorf("xfrmif: %s: read queue %d: %w", ifc.name, q, err), false
}

// WaitQueue returns once queue q has carried traffic or has a packet to
// read, at once for a queue that cannot tell (a netstack link, a test
// double): a reader allocates its batch buffers only then, so that an idle
// interface costs little (a TUN queue's buffers, 128 of the MTU, are
// 190 KiB). Its errors are ReadQueue's: ErrClosed once the interface is
// closed, one matching os.ErrDeadlineExceeded after a read deadline.
func (ifc *Interface) WaitQueue(q int) error {
	w, ok := ifc.queues[q].(interface{ Wait() error })
	if !ok {
		return nil
	}
	err := w.Wait()
	switch {
	case err == nil || errors.Is(err, os.ErrDeadlineExceeded):
		return err
	case errors.Is(err, os.ErrClosed) || ifc.closed.Load():
		return ErrClosed
	}
	return fmt.Errorf("xfrmif: %s: wait queue %d: %w", ifc.name, q, err)
}

// SetReadDeadline makes a blocked or later ReadQueue of queue q return an
// error matching os.ErrDeadlineExceeded once t has passed; the zero time
// removes the deadline. A read blocks in the poller, where only a
// deadline (or Close) releases it. Queues without a file (a netstack link,
// a test double) return ErrNoDeadline: Close releases them.
func (ifc *Interface) SetReadDeadline(q int, t time.Time) error {
	switch f := ifc.queues[q].(type) {
	case interface{ SetReadDeadline(time.Time) error }: // a TUN queue
		return f.SetReadDeadline(t)
	case interface{ File() *os.File }: // a wireguard/tun device
		return f.File().SetReadDeadline(t)
	}
	return ErrNoDeadline
}
