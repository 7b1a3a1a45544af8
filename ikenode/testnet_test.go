package ikenode

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// manualClock is a Clock that moves only when the test says: its
// tickers tick as advance passes their period.
type manualClock struct {
	mu      sync.Mutex
	now     time.Time
	tickers []*manualTicker
}

type manualTicker struct {
	c       chan time.Time // unbuffered: a send returns once Run took it
	every   time.Duration
	next    time.Time
	stopped chan struct{}
	once    sync.Once
}

func newManualClock() *manualClock {
	// Now, not a fixed date: the certificates the tests make are valid
	// from the real now.
	return &manualClock{now: time.Now()}
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) NewTicker(d time.Duration) (<-chan time.Time, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tk := &manualTicker{c: make(chan time.Time), every: d, next: c.now.Add(d), stopped: make(chan struct{})}
	c.tickers = append(c.tickers, tk)
	return tk.c, func() {
		tk.once.Do(func() { close(tk.stopped) })
		c.mu.Lock()
		defer c.mu.Unlock()
		if i := slices.Index(c.tickers, tk); i >= 0 {
			c.tickers = slices.Delete(c.tickers, i, i+1)
		}
	}
}

// step moves the clock by d and hands each ticker that came due its
// tick (once, however many periods d spans: as time.Ticker drops ticks
// for a slow reader). It returns once every due ticker's reader took
// its tick, or its ticker stopped; an error after 10 s of real time.
func (c *manualClock) step(d time.Duration) error {
	c.mu.Lock()
	c.now = c.now.Add(d)
	now := c.now
	var due []*manualTicker
	for _, tk := range c.tickers {
		if !now.Before(tk.next) {
			for !now.Before(tk.next) {
				tk.next = tk.next.Add(tk.every)
			}
			due = append(due, tk)
		}
	}
	c.mu.Unlock()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for _, tk := range due {
		select {
		case tk.c <- now:
		case <-tk.stopped:
		case <-timeout.C:
			return fmt.Errorf("a ticker's reader did not take the tick of %v", now)
		}
	}
	return nil
}

// memNet is an in-memory network of IKE ports, a Transport: a datagram
// sent to an address and port bound in it is handed at once to the
// binder's deliver (the IKE daemon's bounded queue, which drops what does
// not fit); to one not bound, it is lost, as UDP would lose it. It
// starts no goroutine.
type memNet struct {
	mu    sync.Mutex
	binds map[netip.AddrPort]*memBind // by bound address (unspecified: wildcard) and port
	port  uint16                      // the last port chosen for port 0
	// delivered counts the datagrams handed to a deliver, each once
	// deliver returned (settle relies on it: see there).
	delivered atomic.Uint64
}

type memBind struct {
	net     *memNet
	addrs   []netip.AddrPort
	port    uint16
	deliver func(b []byte, local, remote netip.AddrPort)
}

func newMemNet() *memNet { return &memNet{binds: map[netip.AddrPort]*memBind{}, port: 20000} }

func (n *memNet) Listen(addrs []netip.Addr, port uint16, deliver func(b []byte, local, remote netip.AddrPort)) (Bind, error) {
	if len(addrs) == 0 {
		addrs = []netip.Addr{netip.IPv4Unspecified(), netip.IPv6Unspecified()}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if port == 0 {
		for taken := true; taken; {
			n.port++
			taken = false
			for ap := range n.binds {
				taken = taken || ap.Port() == n.port
			}
		}
		port = n.port
	}
	b := &memBind{net: n, port: port, deliver: deliver}
	for _, a := range addrs {
		ap := netip.AddrPortFrom(a, port)
		if _, ok := n.binds[ap]; ok {
			return nil, syscall.EADDRINUSE
		}
		b.addrs = append(b.addrs, ap)
	}
	for _, ap := range b.addrs {
		n.binds[ap] = b
	}
	return b, nil
}

func (b *memBind) Port() uint16 { return b.port }

func (b *memBind) Close() error {
	b.net.mu.Lock()
	defer b.net.mu.Unlock()
	for _, ap := range b.addrs {
		if b.net.binds[ap] == b {
			delete(b.net.binds, ap)
		}
	}
	return nil
}

func (b *memBind) Send(p []byte, local netip.Addr, remote netip.AddrPort) error {
	from := netip.AddrPortFrom(local, b.port)
	b.net.mu.Lock()
	if b.net.binds[from] != b && b.net.binds[netip.AddrPortFrom(unspecified(local), b.port)] != b {
		b.net.mu.Unlock()
		return fmt.Errorf("no IKE socket for %s from %s", remote, local)
	}
	to, ok := b.net.binds[remote]
	if !ok {
		to = b.net.binds[netip.AddrPortFrom(unspecified(remote.Addr()), remote.Port())]
	}
	b.net.mu.Unlock()
	if to != nil {
		to.deliver(slices.Clone(p), remote, from)
		b.net.delivered.Add(1)
	}
	return nil
}

func unspecified(a netip.Addr) netip.Addr {
	if a.Is4() {
		return netip.IPv4Unspecified()
	}
	return netip.IPv6Unspecified()
}

// testNet is the world of one test's IKE daemons: one manual clock, one
// in-memory network.
type testNet struct {
	clock *manualClock
	mem   *memNet
	mu    sync.Mutex
	ms    []*Daemon
}

func newTestNet() *testNet { return &testNet{clock: newManualClock(), mem: newMemNet()} }

// configure makes c's IKE daemon one of n's.
func (n *testNet) configure(c *Config) {
	c.Clock, c.Transport = n.clock, n.mem
}

func (n *testNet) add(m *Daemon) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.ms = append(n.ms, m)
}

// settle returns once every IKE daemon of n is idle: a round of barriers
// (a request through each Run loop, which runs it only after what it
// was handling) found every queue empty, and no datagram was delivered
// meanwhile. What a test checks after it is all that will happen until
// the clock moves or the test acts: no sleep can prove more.
//
// Why one such round suffices: a datagram delivered before the round
// began is in its receiver's queue when the receiver's barrier runs,
// or was handled before it; one delivered during the round was counted
// by the time the round ended, since each sender's barrier waited for
// what the sender was handling (the count follows the delivery). The
// IKE daemons' datagrams must all go through the network (memNet, and
// loopNATT given one), and the test must not deliver any meanwhile.
func (n *testNet) settle(t testing.TB) {
	t.Helper()
	n.mu.Lock()
	ms := slices.Clone(n.ms)
	n.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		before := n.mem.delivered.Load()
		idle := true
		for _, m := range ms {
			var queued int
			if err := m.do(func() { queued = len(m.inbox) + len(m.acquires) }); err != nil {
				continue // stopped: its queues are no one's
			}
			idle = idle && queued == 0
		}
		if idle && n.mem.delivered.Load() == before {
			return
		}
	}
	t.Fatalf("the IKE daemons did not settle within 10 s")
}

// advance moves the clock by d, a tick at a time, the IKE daemons settled
// after each.
func (n *testNet) advance(t testing.TB, d time.Duration) {
	t.Helper()
	n.settle(t)
	for d > 0 {
		s := min(d, tickEvery)
		if err := n.clock.step(s); err != nil {
			t.Fatal(err)
		}
		n.settle(t)
		d -= s
	}
}

// waitFor settles the IKE daemons and checks cond; while it is false it
// advances the clock a tick and checks again, up to 10 minutes of the
// clock. Where cond holds without the clock moving, it moves not.
func (n *testNet) waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	n.settle(t)
	start := n.clock.Now()
	for !cond() {
		if n.clock.Now().Sub(start) > 10*time.Minute {
			t.Fatalf("no %s within 10 minutes of the clock", what)
		}
		n.advance(t, tickEvery)
	}
}

// elapsed is how far the clock moved since start.
func (n *testNet) since(start time.Time) time.Duration { return n.clock.Now().Sub(start) }

// TestMemNet: the in-memory network the other tests run on delivers a
// datagram to the bind of its destination, bound or wildcard, with both
// addresses; drops one to an address no one binds, or bound no more;
// refuses a port taken and a source not bound.
func TestMemNet(t *testing.T) {
	type got struct {
		b             string
		local, remote netip.AddrPort
	}
	n := newMemNet()
	var gotA, gotW []got
	a, err := n.Listen([]netip.Addr{netip.MustParseAddr("192.0.2.1")}, 500, func(b []byte, l, r netip.AddrPort) { gotA = append(gotA, got{string(b), l, r}) })
	if err != nil {
		t.Fatal(err)
	}
	w, err := n.Listen(nil, 0, func(b []byte, l, r netip.AddrPort) { gotW = append(gotW, got{string(b), l, r}) })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Listen([]netip.Addr{netip.MustParseAddr("192.0.2.1")}, 500, nil); !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("a second bind of 192.0.2.1:500: %v, want EADDRINUSE", err)
	}
	wp := netip.AddrPortFrom(netip.MustParseAddr("198.51.100.7"), w.Port())
	if err := a.Send([]byte("to w"), netip.MustParseAddr("192.0.2.1"), wp); err != nil {
		t.Fatal(err)
	}
	if err := w.Send([]byte("to a"), netip.MustParseAddr("198.51.100.7"), netip.MustParseAddrPort("192.0.2.1:500")); err != nil {
		t.Fatal(err)
	}
	if err := a.Send([]byte("from elsewhere"), netip.MustParseAddr("192.0.2.2"), wp); err == nil {
		t.Errorf("a send from an address not bound succeeded")
	}
	a.Send([]byte("to no one"), netip.MustParseAddr("192.0.2.1"), netip.MustParseAddrPort("192.0.2.9:500"))
	w.Close()
	a.Send([]byte("to w closed"), netip.MustParseAddr("192.0.2.1"), wp)
	if want := []got{{"to w", wp, netip.MustParseAddrPort("192.0.2.1:500")}}; !slices.Equal(gotW, want) {
		t.Errorf("w got %v, want %v", gotW, want)
	}
	if want := []got{{"to a", netip.MustParseAddrPort("192.0.2.1:500"), wp}}; !slices.Equal(gotA, want) {
		t.Errorf("a got %v, want %v", gotA, want)
	}
	if d := n.delivered.Load(); d != 2 {
		t.Errorf("delivered %d, want 2", d)
	}
}
