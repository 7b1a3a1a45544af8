// Package xfrmiftest holds test doubles for package xfrmif, as
// wireguard-go's tun/tuntest does for its tun package: a Link with no
// kernel device over queues of the test's choice, and queues for it.
package xfrmiftest

import (
	"bytes"
	"net/netip"
	"os"
	"sync"

	"github.com/ipsecd/ipsecd/xfrmif"
)

// Link is an xfrmif.Link over the queues it is given, with no kernel
// device: configuration changes nothing, and Close closes Done, which the
// queues of this package wait on. Safe for concurrent use.
type Link struct {
	queues []xfrmif.Queue
	done   chan struct{}
	once   sync.Once
}

// NewLink returns a Link over queues.
func NewLink(queues ...xfrmif.Queue) *Link {
	return &Link{queues: queues, done: make(chan struct{})}
}

// NewIdleLink returns a Link of n idle queues: reads wait for Close,
// writes succeed. It lets a registry, a node or the metrics run without
// TUN devices.
func NewIdleLink(n int) *Link {
	l := NewLink()
	for range n {
		l.queues = append(l.queues, idleQueue{l.done})
	}
	return l
}

// NewChanLink returns a Link of one ChanQueue, whose reads end with
// os.ErrClosed once the link is closed.
func NewChanLink() (*Link, *ChanQueue) {
	l := NewLink()
	q := &ChanQueue{In: make(chan []byte, 16), Out: make(chan []byte, 16), closed: l.done}
	l.queues = []xfrmif.Queue{q}
	return l, q
}

// Done is closed by Close.
func (l *Link) Done() <-chan struct{} { return l.done }

func (l *Link) Queues() []xfrmif.Queue           { return l.queues }
func (l *Link) SetMTU(int) error                 { return nil }
func (l *Link) AddAddress(netip.Prefix) error    { return nil }
func (l *Link) RemoveAddress(netip.Prefix) error { return nil }
func (l *Link) AddRoute(netip.Prefix) error      { return nil }
func (l *Link) RemoveRoute(netip.Prefix) error   { return nil }

// Close closes Done; it is idempotent.
func (l *Link) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// idleQueue is a queue whose reads wait for its link's Close and whose
// writes succeed: enough for an xfrmif.Interface to count what is written
// through each queue.
type idleQueue struct{ closed <-chan struct{} }

func (q idleQueue) Read([][]byte, []int, int) (int, error) { <-q.closed; return 0, os.ErrClosed }
func (q idleQueue) Write(bufs [][]byte, offset int) (int, error) {
	n := 0
	for _, b := range bufs {
		n += len(b) - offset
	}
	return n, nil
}
func (q idleQueue) BatchSize() int { return 1 }

// ChanQueue is a queue fed and drained by the test: each Read returns one
// packet sent on In; each packet written is sent, copied, on Out (the
// write waits for room). Reads end with os.ErrClosed when the link closes.
type ChanQueue struct {
	In, Out chan []byte
	closed  <-chan struct{}
}

func (q *ChanQueue) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	select {
	case p := <-q.In:
		sizes[0] = copy(bufs[0][offset:], p)
		return 1, nil
	case <-q.closed:
		return 0, os.ErrClosed
	}
}

func (q *ChanQueue) Write(bufs [][]byte, offset int) (int, error) {
	for _, b := range bufs {
		q.Out <- bytes.Clone(b[offset:])
	}
	return len(bufs), nil
}

func (q *ChanQueue) BatchSize() int { return 1 }
