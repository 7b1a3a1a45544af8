package datapath

import (
	"context"
	"sync"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/xfrmif"
)

// Engine runs the workers. It is safe for concurrent use.
type Engine struct {
	sad  *sa.SAD
	reg  *xfrmif.Registry
	conn Underlay
	log  logrus.FieldLogger

	// recvBufSize is the buffer of one received ESP packet: headroom,
	// the largest datagram the underlay hands up, and slack.
	recvBufSize int
	// inboundWorkers is how many goroutines open each underlay socket's
	// batches (see openers); set before Start.
	inboundWorkers int

	wg sync.WaitGroup
}

// recvPacketSize is what a receive buffer holds beyond its headroom: the
// largest ESP packet, and room for the TUN's GRO to coalesce the packets
// that follow into this one (it appends within the buffer's capacity).
// With 9 KiB buffers GRO merged about 6 TCP segments per write and a
// single TCP stream ran at 2.7 Gbit/s; with 64 KiB, 4.7 Gbit/s.
const recvPacketSize = 65535

// New returns an engine over the given SAD, interface registry and
// underlay. Nothing runs until Start and StartInterface.
func New(sad *sa.SAD, reg *xfrmif.Registry, conn Underlay, log logrus.FieldLogger) *Engine {
	return &Engine{sad: sad, reg: reg, conn: conn, log: log, recvBufSize: sa.Headroom + recvPacketSize + sa.Tailroom}
}

// SetInboundWorkers sets how many goroutines open each underlay socket's
// batches, the socket's reader included: the daemon gives the number of
// queues of its widest interface, bounded by GOMAXPROCS. 1 (the default)
// opens on the reader alone. Call it before Start.
func (e *Engine) SetInboundWorkers(n int) { e.inboundWorkers = max(n, 1) }

// Start starts one receiving worker per underlay socket (routineReceive).
// They stop when ctx is done or the underlay is closed.
func (e *Engine) Start(ctx context.Context) {
	for _, r := range e.conn.Receivers() {
		e.wg.Add(1)
		go e.routineReceive(ctx, r)
	}
}

// Workers are the transmitting workers of one interface, one per queue.
type Workers struct {
	// MTU is the largest packet their buffers hold: the interface's MTU
	// when they started. An interface whose MTU grows needs new workers.
	MTU int

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Stop stops the workers and waits for them.
func (w *Workers) Stop() {
	w.cancel()
	w.wg.Wait()
}

// StartInterface starts one transmitting worker per queue of ifc
// (routineTransmit). They stop when ctx is done, Stop is called, or the
// interface is closed (a queue without a read deadline, such as the
// netstack's, only then). Their buffers hold packets up to the
// interface's MTU now: TUN reads split offloaded super-packets into
// MTU-sized ones, and an interface of 1,000 would otherwise pay 128
// buffers of the largest size per queue.
func (e *Engine) StartInterface(ctx context.Context, ifc *xfrmif.Interface) *Workers {
	ctx, cancel := context.WithCancel(ctx)
	w := &Workers{MTU: ifc.MTU(), cancel: cancel}
	for q := range ifc.NumQueues() {
		w.wg.Add(1)
		e.wg.Add(1)
		go e.routineTransmit(ctx, ifc, q, w.MTU, w)
	}
	return w
}

// Wait waits for every worker to stop.
func (e *Engine) Wait() { e.wg.Wait() }
