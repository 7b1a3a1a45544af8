package xfrmif

import (
	"fmt"

	"github.com/ipsecd/ipsecd/internal/gso"
)

// frameReader is a queue that hands out whole virtio-net frames, its
// super-packets uncut (a TUN queue: tun's ReadFrame).
type frameReader interface {
	ReadFrame(buf []byte) (int, error)
}

// ReadsFrames reports whether queue q is read with ReadQueueFrame rather
// than ReadQueue: a TUN queue, whose super-packets the reader then cuts
// in place (gso.Frame) and seals segment by segment with no copy. Other
// queues (a netstack link, a test double) are read with ReadQueue.
func (ifc *Interface) ReadsFrames(q int) bool {
	_, ok := ifc.queues[q].(frameReader)
	return ok
}

// ReadQueueFrame reads one frame from queue q, which ReadsFrames, into buf
// and parses it into f (gso.Frame.Parse: at most maxSegments segments of
// at most maxSegLen bytes). buf must hold the largest frame (tun's
// MaxFrameSize) and gso.Tailroom more, which the read leaves free. The
// frame's segments are counted as tx packets and bytes, as ReadQueue
// counts the packets it splits a super-packet into. A failed read or a
// frame Parse refuses is one tx error (and an error, the frame dropped);
// after Close the error matches ErrClosed, after a read deadline
// os.ErrDeadlineExceeded. One goroutine reads a queue at a time; it keeps
// buf and f.
func (ifc *Interface) ReadQueueFrame(q int, buf []byte, f *gso.Frame, maxSegments, maxSegLen int) error {
	fr, ok := ifc.queues[q].(frameReader)
	if !ok {
		return fmt.Errorf("xfrmif: %s: queue %d reads no frames", ifc.name, q)
	}
	s := &ifc.shards[q]
	n, err := fr.ReadFrame(buf[:len(buf)-gso.Tailroom])
	if err != nil {
		err, _ = ifc.readError(q, err)
		return err
	}
	if err := f.Parse(buf[:n], maxSegments, maxSegLen); err != nil {
		s.txErrors.Add(1)
		return fmt.Errorf("xfrmif: %s: read queue %d: %w", ifc.name, q, err)
	}
	s.txPackets.Add(uint64(f.Segments()))
	s.txBytes.Add(uint64(f.Bytes()))
	return nil
}
