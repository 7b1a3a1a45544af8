package xfrmif

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/ipsecd/ipsecd/tun"
)

// QueueBuffers sizes the buffers RunQueue reads into. Each packet starts
// Headroom bytes into its buffer and may grow by Tailroom bytes at its end,
// so ESP can be sealed in place (outer headers in front, trailer and ICV
// behind).
type QueueBuffers struct {
	// Headroom is the offset packets are read at; at least tun.MinOffset.
	Headroom int
	// Tailroom is the room after the largest packet.
	Tailroom int
	// PacketSize is the largest packet a buffer holds; 0 means
	// tun.MaxPacketSize. With offloads on, reads are split into packets
	// no larger than the MTU, so the MTU (plus the room an MTU increase
	// on reload may need) is enough and saves memory: 128 buffers of 64
	// KiB are 8 MiB per queue.
	PacketSize int
}

// RunQueue reads queue q in batches until the interface is closed (it
// returns nil) or ctx is done (it returns ctx.Err()). For each batch it
// calls handle with the buffers, the packet sizes and the count: packet i
// is bufs[i][Headroom:Headroom+sizes[i]], which handle may change in place,
// within the buffer's capacity, but must not keep after it returns; the
// buffers are allocated once and reused. handle runs on RunQueue's
// goroutine, one batch at a time. Packets are counted as tx; failed reads
// as tx errors.
//
// One RunQueue per queue at a time.
func (ifc *Interface) RunQueue(ctx context.Context, q int, sz QueueBuffers, handle func(bufs [][]byte, sizes []int, n int)) error {
	if q < 0 || q >= len(ifc.queues) {
		return fmt.Errorf("xfrmif: %s: queue %d of %d", ifc.name, q, len(ifc.queues))
	}
	if sz.Headroom < tun.MinOffset {
		return fmt.Errorf("xfrmif: %s: headroom %d, want at least %d", ifc.name, sz.Headroom, tun.MinOffset)
	}
	if sz.PacketSize == 0 {
		sz.PacketSize = tun.MaxPacketSize
	}
	queue := ifc.queues[q]
	s := &ifc.shards[q]

	// A read blocks in the poller: a deadline in the past releases it
	// when ctx is done. Links without files are released by Close.
	var file *os.File
	if f, ok := queue.(interface{ File() *os.File }); ok {
		file = f.File()
	}
	if file != nil {
		file.SetReadDeadline(time.Time{})
		stop := context.AfterFunc(ctx, func() { file.SetReadDeadline(time.Unix(1, 0)) })
		defer stop()
	}

	batch := max(queue.BatchSize(), 1)
	size := sz.Headroom + sz.PacketSize + sz.Tailroom
	mem := make([]byte, batch*size)
	full := make([][]byte, batch)
	for i := range full {
		full[i] = mem[i*size : (i+1)*size : (i+1)*size]
	}
	bufs := make([][]byte, batch)
	sizes := make([]int, batch)
	failures := 0 // in a row
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		copy(bufs, full) // handle may have resliced them
		n, err := queue.Read(bufs, sizes, sz.Headroom)
		if err != nil {
			switch {
			case errors.Is(err, os.ErrClosed) || ifc.closed.Load():
				return nil
			case errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil:
				return ctx.Err()
			case errors.Is(err, os.ErrDeadlineExceeded):
				continue
			}
			// A bad super-packet (or too many segments for the batch):
			// count it and go on; n packets may still be valid.
			s.txErrors.Add(1)
			if failures++; failures > 16 {
				time.Sleep(time.Millisecond) // do not spin on a lasting error
			}
			if n <= 0 {
				continue
			}
		} else {
			failures = 0
		}
		var bytes uint64
		for _, sz := range sizes[:n] {
			bytes += uint64(sz)
		}
		s.txPackets.Add(uint64(n))
		s.txBytes.Add(bytes)
		handle(bufs, sizes, n)
	}
}
