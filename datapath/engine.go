package datapath

import (
	"context"
	"errors"
	"sync"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/underlay"
	"github.com/ipsecd/ipsecd/xfrmif"
)

// Engine runs the workers. It is safe for concurrent use.
type Engine struct {
	sad  *sa.SAD
	reg  *xfrmif.Registry
	conn *underlay.Conn
	log  *logrus.Entry

	// recvBufSize is the buffer of one received ESP packet: headroom,
	// the largest datagram the underlay hands up, and slack.
	recvBufSize int

	wg sync.WaitGroup
}

// recvPacketSize is what a receive buffer holds beyond its headroom: the
// largest ESP packet, and room for the TUN's GRO to coalesce the packets
// that follow into this one (it appends within the buffer's capacity).
// With 9 KiB buffers GRO merged about 6 TCP segments per write and a
// single TCP stream ran at 2.7 Gbit/s; with 64 KiB, 4.7 Gbit/s.
const recvPacketSize = 65535

// sendPacketSize is the largest cleartext packet a send buffer holds. TUN
// reads are split into packets no larger than the interface MTU, so this
// bounds the MTU an interface may have.
const sendPacketSize = 9000

// New returns an engine over the given SAD, interface registry and
// underlay. Nothing runs until Start and StartInterface.
func New(sad *sa.SAD, reg *xfrmif.Registry, conn *underlay.Conn, log *logrus.Entry) *Engine {
	return &Engine{sad: sad, reg: reg, conn: conn, log: log, recvBufSize: sa.Headroom + recvPacketSize + sa.Tailroom}
}

// Start starts one receiving worker per underlay socket. They stop when ctx
// is done or the underlay is closed.
func (e *Engine) Start(ctx context.Context) {
	for _, r := range e.conn.Readers() {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			e.receive(ctx, r)
		}()
	}
}

// StartInterface starts one sending worker per queue of ifc. They stop when
// ctx is done or the interface is closed.
func (e *Engine) StartInterface(ctx context.Context, ifc *xfrmif.Interface) {
	for q := range ifc.NumQueues() {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			w := newSender(e, ifc, q)
			err := ifc.RunQueue(ctx, q, xfrmif.QueueBuffers{
				Headroom:   sa.Headroom,
				Tailroom:   sa.Tailroom,
				PacketSize: sendPacketSize,
			}, w.handle)
			if err != nil && !errors.Is(err, context.Canceled) {
				e.log.WithError(err).WithField("interface", ifc.Name()).Warn("queue worker stopped")
			}
		}()
	}
}

// Wait waits for every worker to stop.
func (e *Engine) Wait() { e.wg.Wait() }
