package xfrmif

import (
	"net/netip"
	"os"
	"slices"
	"sync"
)

// fakeQueue is a queue fed by a channel that records what is written.
type fakeQueue struct {
	in     chan []byte
	closed chan struct{}

	mu      sync.Mutex
	written [][]byte
}

func (q *fakeQueue) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	select {
	case p := <-q.in:
		sizes[0] = copy(bufs[0][offset:], p)
		return 1, nil
	case <-q.closed:
		return 0, os.ErrClosed
	}
}

func (q *fakeQueue) Write(bufs [][]byte, offset int) (int, error) {
	select {
	case <-q.closed:
		return 0, os.ErrClosed
	default:
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, b := range bufs {
		q.written = append(q.written, slices.Clone(b[offset:]))
		n += len(b) - offset
	}
	return n, nil
}

func (q *fakeQueue) BatchSize() int { return 4 }

// fakeLink is a Link with fake queues that remembers its configuration.
type fakeLink struct {
	queues []Queue
	closed chan struct{}

	mu     sync.Mutex
	mtu    int
	addrs  []netip.Prefix
	routes []netip.Prefix
	calls  int // configuration calls
}

func newFakeLink(queues int) *fakeLink {
	l := &fakeLink{closed: make(chan struct{})}
	for range queues {
		l.queues = append(l.queues, &fakeQueue{in: make(chan []byte, 16), closed: l.closed})
	}
	return l
}

func (l *fakeLink) Queues() []Queue { return l.queues }

func (l *fakeLink) SetMTU(mtu int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	l.mtu = mtu
	return nil
}

func (l *fakeLink) AddAddress(p netip.Prefix) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	l.addrs = append(l.addrs, p)
	return nil
}

func (l *fakeLink) RemoveAddress(p netip.Prefix) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	l.addrs = slices.DeleteFunc(l.addrs, func(q netip.Prefix) bool { return q == p })
	return nil
}

func (l *fakeLink) AddRoute(p netip.Prefix) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	l.routes = append(l.routes, p)
	return nil
}

func (l *fakeLink) RemoveRoute(p netip.Prefix) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	l.routes = slices.DeleteFunc(l.routes, func(q netip.Prefix) bool { return q == p })
	return nil
}

func (l *fakeLink) Close() error {
	select {
	case <-l.closed:
	default:
		close(l.closed)
	}
	return nil
}

func (l *fakeLink) isClosed() bool {
	select {
	case <-l.closed:
		return true
	default:
		return false
	}
}

// fakeRegistry returns a Registry whose Sync makes fake links, and the
// links it made by name.
func fakeRegistry() (*Registry, func(name string) *fakeLink) {
	var mu sync.Mutex
	links := map[string]*fakeLink{}
	r := &Registry{Create: func(c Config) (*Interface, error) {
		l := newFakeLink(max(c.Queues, 1))
		mu.Lock()
		links[c.Name] = l
		mu.Unlock()
		return NewInterface(c, l)
	}}
	return r, func(name string) *fakeLink {
		mu.Lock()
		defer mu.Unlock()
		return links[name]
	}
}

func mustFake(t interface{ Fatal(...any) }, name string, ifID uint32) *Interface {
	ifc, err := NewInterface(Config{Name: name, IfID: ifID}, newFakeLink(1))
	if err != nil {
		t.Fatal(err)
	}
	return ifc
}
