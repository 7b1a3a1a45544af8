// Package datapathtest holds test doubles for package datapath, as
// wireguard-go's conn/bindtest stands in for its sockets.
package datapathtest

import (
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/ipsecd/ipsecd/datapath"
	"github.com/ipsecd/ipsecd/underlay"
)

// Pipe returns two in-memory underlays joined to each other: what one
// end writes, the other end's receiver reads, as ESP in UDP from the
// writer's address. Each end has one receiver. A message that finds the
// other end's queue full is dropped and counted, as a socket buffer
// drops it. Close an end to release its reader.
func Pipe(a, b netip.AddrPort) (*End, *End) {
	ea, eb := newEnd(a), newEnd(b)
	ea.peer, eb.peer = eb, ea
	return ea, eb
}

// queueLen is how many messages an end holds for its reader.
const queueLen = 1024

// End is one end of a Pipe: a datapath.Underlay. Its methods are safe
// for concurrent use.
type End struct {
	addr  netip.AddrPort
	peer  *End
	queue chan []byte

	mu sync.Mutex
	// mu guards: closed, deadline, wake, written, dropped.
	closed   bool
	deadline time.Time
	wake     chan struct{} // closed when closed or deadline change
	written  int
	dropped  int
}

func newEnd(addr netip.AddrPort) *End {
	return &End{addr: addr, queue: make(chan []byte, queueLen), wake: make(chan struct{})}
}

var _ datapath.Underlay = (*End)(nil)

// Receivers returns the end's one receiver (the End itself).
func (e *End) Receivers() []datapath.Receiver { return []datapath.Receiver{(*receiver)(e)} }

// WriteBatch copies each message to the other end's queue.
func (e *End) WriteBatch(msgs []underlay.Message) error {
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return underlay.ErrClosed
	}
	for i := range msgs {
		pkt := append([]byte(nil), msgs[i].Data()...)
		select {
		case e.peer.queue <- pkt:
			e.count(&e.written)
		default:
			e.count(&e.dropped)
		}
	}
	return nil
}

func (e *End) count(n *int) {
	e.mu.Lock()
	*n++
	e.mu.Unlock()
}

// Counts returns how many messages this end wrote to the other, and how
// many it dropped on a full queue.
func (e *End) Counts() (written, dropped int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.written, e.dropped
}

// Close releases the end's reader (with underlay.ErrClosed) and refuses
// later writes.
func (e *End) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.closed {
		e.closed = true
		close(e.wake)
	}
	return nil
}

// receiver is an End as its datapath.Receiver.
type receiver End

func (r *receiver) BatchSize() int { return 64 }
func (r *receiver) String() string { return "pipe " + r.addr.String() }

func (r *receiver) SetReadDeadline(t time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return underlay.ErrClosed
	}
	r.deadline = t
	close(r.wake)
	r.wake = make(chan struct{})
	return nil
}

// ReadBatch waits for a message, then takes what is queued, up to
// len(msgs), each copied to msgs[i].Buf[msgs[i].Off:].
func (r *receiver) ReadBatch(msgs []underlay.Message) (int, error) {
	for {
		r.mu.Lock()
		closed, deadline, wake := r.closed, r.deadline, r.wake
		r.mu.Unlock()
		if closed {
			return 0, underlay.ErrClosed
		}
		var timeout <-chan time.Time
		if !deadline.IsZero() {
			d := time.Until(deadline)
			if d <= 0 {
				return 0, os.ErrDeadlineExceeded
			}
			t := time.NewTimer(d)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case pkt := <-r.queue:
			n := 0
			for {
				m := &msgs[n]
				m.Len = copy(m.Buf[m.Off:], pkt)
				m.Peer, m.Local, m.Raw = r.peer.addr, r.addr.Addr(), false
				n++
				if n == len(msgs) {
					return n, nil
				}
				select {
				case pkt = <-r.queue:
				default:
					return n, nil
				}
			}
		case <-wake:
		case <-timeout:
			return 0, os.ErrDeadlineExceeded
		}
	}
}
