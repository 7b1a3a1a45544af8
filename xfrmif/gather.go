package xfrmif

import (
	"errors"
	"os"
	"sync"

	"github.com/ipsecd/ipsecd/internal/gro"
)

// gatherQueue is a Queue that can write one packet from several buffers in
// one go (a TUN queue: tun's WriteGather, one writev). WriteQueue then
// coalesces a batch's TCP segments itself (package internal/gro): each
// super-packet is its first segment, behind a virtio-net header, and the
// payloads of the others where they were opened, so that no payload is
// copied in user space and none is checksummed (ESP's ICV vouched for
// them). A Queue without it (a netstack link) gets the batch through
// Write as it is.
type gatherQueue interface {
	Queue
	// WriteGather writes one packet gathered from parts, the first
	// beginning with the virtio-net header. The caller keeps parts.
	WriteGather(parts [][]byte) error
}

// queueWriter serialises the writes of one queue and keeps their
// coalescing state. It is padded to a cache line of its own.
type queueWriter struct {
	sync.Mutex
	// mu guards: gro, made at the queue's first coalesced write so that
	// an idle queue costs nothing.
	gro   *gro.Coalescer
	other [][]byte // the batch's packets that are not TCP, for Write
	_     [64 - 40]byte
}

// writeGathered writes bufs[i][offset:] through q: the TCP segments as
// super-packets and single packets, in the order of their first packet,
// then the other packets, in their order, with one Write (which
// coalesces UDP datagrams where the kernel takes USO: a flow is either
// TCP or not, so no flow's order changes). It returns len(bufs) or the
// first error. A failed frame does not stop the others, as wireguard/tun's
// Write goes on past a failed packet; once the queue is closed nothing
// more is tried. Called with w locked.
func (w *queueWriter) writeGathered(q gatherQueue, bufs [][]byte, offset int) (int, error) {
	if w.gro == nil {
		w.gro = new(gro.Coalescer)
	}
	c := w.gro
	c.Plan(bufs, offset)
	defer c.Reset()
	other := w.other[:0]
	var first error
	for f := range c.Frames() {
		if !c.TCP(f) {
			other = append(other, bufs[c.Head(f)])
			continue
		}
		parts, _ := c.Frame(f)
		if err := q.WriteGather(parts); err != nil {
			if errors.Is(err, os.ErrClosed) {
				return 0, err
			}
			if first == nil {
				first = err
			}
		}
	}
	if len(other) > 0 {
		_, err := q.Write(other, offset)
		if first == nil {
			first = err
		}
		clear(other)
	}
	w.other = other[:0]
	if first != nil {
		return 0, first
	}
	return len(bufs), nil
}
