// Package xfrmiftest holds test doubles for package xfrmif, as
// wireguard-go's tun/tuntest does for its tun package.
package xfrmiftest

import (
	"net/netip"
	"os"

	"github.com/ipsecd/ipsecd/xfrmif"
)

// idleQueue is an xfrmif.Queue whose reads wait for Close and whose writes
// succeed: enough for an xfrmif.Interface to count what is written
// through each queue.
type idleQueue struct{ closed chan struct{} }

func (q idleQueue) Read([][]byte, []int, int) (int, error) { <-q.closed; return 0, os.ErrClosed }
func (q idleQueue) Write(bufs [][]byte, offset int) (int, error) {
	n := 0
	for _, b := range bufs {
		n += len(b) - offset
	}
	return n, nil
}
func (q idleQueue) BatchSize() int { return 1 }

// IdleLink is an xfrmif.Link of idle queues with no kernel device: reads
// wait for Close, writes succeed, configuration changes nothing. It lets
// a registry, a node or the metrics run without TUN devices.
type IdleLink struct {
	queues []xfrmif.Queue
	closed chan struct{}
}

// NewIdleLink returns an IdleLink with the given number of queues.
func NewIdleLink(queues int) *IdleLink {
	l := &IdleLink{closed: make(chan struct{})}
	for range queues {
		l.queues = append(l.queues, idleQueue{l.closed})
	}
	return l
}

func (l *IdleLink) Queues() []xfrmif.Queue           { return l.queues }
func (l *IdleLink) SetMTU(int) error                 { return nil }
func (l *IdleLink) AddAddress(netip.Prefix) error    { return nil }
func (l *IdleLink) RemoveAddress(netip.Prefix) error { return nil }
func (l *IdleLink) AddRoute(netip.Prefix) error      { return nil }
func (l *IdleLink) RemoveRoute(netip.Prefix) error   { return nil }
func (l *IdleLink) Close() error                     { close(l.closed); return nil }
