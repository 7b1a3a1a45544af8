package datapath

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/underlay"
	"github.com/ipsecd/ipsecd/xfrmif"
)

// worker is one of the data path's two loops, run by run: a transmitter
// (interface queue → seal → underlay, transmit.go) or a receiver (underlay
// → open → interface, receive.go). It owns its buffers; it is used by one
// goroutine.
type worker interface {
	// read reads a batch into the worker's buffers and returns how many
	// packets it holds; with an error some may still be valid.
	read() (int, error)
	// handle seals or opens the n packets read and passes them on.
	handle(n int)
	// setReadDeadline releases a blocked read at t (a time in the past
	// releases it now; the zero time clears it).
	setReadDeadline(t time.Time)
}

// run reads and handles batches until ctx is done or the source is closed.
// A read blocks in the poller, so ctx's end sets a read deadline in the
// past to release it. A failed read is logged at debug level (the source
// has counted it) and the loop goes on, pausing after failures in a row
// (backoff).
func run(ctx context.Context, w worker, log logrus.FieldLogger) {
	// A worker restarted on the same source (a queue whose MTU grew)
	// must not inherit its predecessor's past deadline.
	w.setReadDeadline(time.Time{})
	stop := context.AfterFunc(ctx, func() { w.setReadDeadline(time.Unix(1, 0)) })
	defer stop()

	var b backoff
	for ctx.Err() == nil {
		n, err := w.read()
		switch {
		case err == nil:
			b.reset()
		case errors.Is(err, underlay.ErrClosed) || errors.Is(err, xfrmif.ErrClosed):
			return
		case errors.Is(err, os.ErrDeadlineExceeded):
			// ctx is done (the loop ends), or the deadline is
			// an earlier worker's, set late: clear it and read
			// again. Should ctx end after this check, its
			// deadline comes after the clearing, and the loop's
			// check sees it.
			if ctx.Err() == nil {
				w.setReadDeadline(time.Time{})
			}
		default:
			log.WithError(err).Debug("read")
			b.fail()
		}
		if n > 0 {
			w.handle(n)
		}
	}
}

// backoff keeps a worker from spinning on a lasting read error (a broken
// socket, a queue that fails every read): the first failures in a row are
// free, since a bad super-packet or a dropped datagram is one failure among
// successes, then each pauses twice as long as the last, up to
// maxBackoffPause. A success starts again from nothing.
type backoff struct {
	failures int // in a row
}

const (
	freeFailures    = 16
	minBackoffPause = time.Millisecond
	maxBackoffPause = 64 * time.Millisecond
)

// fail counts a failure and pauses as long as pause says.
func (b *backoff) fail() {
	b.failures++
	if d := b.pause(); d > 0 {
		time.Sleep(d)
	}
}

func (b *backoff) reset() { b.failures = 0 }

// pause is the pause after the current run of failures.
func (b *backoff) pause() time.Duration {
	if b.failures <= freeFailures {
		return 0
	}
	d := minBackoffPause
	for i := freeFailures + 1; i < b.failures && d < maxBackoffPause; i++ {
		d *= 2
	}
	return min(d, maxBackoffPause)
}

// batchBuffers returns n buffers of size bytes each, carved from one
// slab (slab_linux.go) when a worker starts, so that steady state
// allocates nothing, and the function that frees the slab once the
// worker is done with every buffer. Each is capped at its own size: an
// append (the TUN's GRO coalescing into a buffer) cannot run into the
// next.
func batchBuffers(n, size int) (bufs [][]byte, free func()) {
	mem, free := newSlab(n * size)
	bufs = make([][]byte, n)
	for i := range bufs {
		bufs[i] = mem[i*size : (i+1)*size : (i+1)*size]
	}
	return bufs, free
}
