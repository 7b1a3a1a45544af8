package datapath

import (
	"context"
	"time"

	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/underlay"
	"github.com/ipsecd/ipsecd/xfrmif"
)

// receiver is the worker of one underlay socket: it reads ESP packets from
// the socket, opens them (on several goroutines: openers) and writes those
// that pass into their interfaces. It is used by one goroutine.
type receiver struct {
	e      *Engine
	r      Receiver
	borrow borrowingReceiver // r, if it can lend its buffers; or nil
	full   [][]byte          // every message's whole buffer, allocated once
	free   func()            // frees full's slab
	msgs   []underlay.Message
	pkts   []sa.Packet
	queue  []int    // each opened packet's interface queue (flowQueue)
	out    [][]byte // the packets of one interface, as WriteQueue takes them
	open   openers
}

// newReceiver allocates the buffers of r's worker: all it will need, once.
func newReceiver(e *Engine, r Receiver) *receiver {
	batch := r.BatchSize()
	borrow, _ := r.(borrowingReceiver)
	full, free := batchBuffers(batch, e.recvBufSize)
	return &receiver{
		e:      e,
		r:      r,
		borrow: borrow,
		full:   full,
		free:   free,
		msgs:   make([]underlay.Message, batch),
		pkts:   make([]sa.Packet, batch),
		queue:  make([]int, batch),
		out:    make([][]byte, 0, batch),
	}
}

// routineReceive is the worker of r until ctx is done or the underlay is
// closed, with its opener helpers. It counts itself out of the engine's
// wait group when it returns.
func (e *Engine) routineReceive(ctx context.Context, r Receiver) {
	defer e.wg.Done()
	w := newReceiver(e, r)
	// Last: once run returned, nothing reads or opens into the buffers
	// (open waits for its helpers' chunks; writes to interfaces and
	// netstack copy or finish within the call).
	defer w.free()
	w.open.start(e.sad, e.inboundWorkers, &e.wg)
	defer w.open.stop()
	run(ctx, w, e.log.WithField("socket", r.String()))
}

// borrowingReceiver is a Receiver that can leave the packets of a
// coalesced datagram in its own buffer (underlay.Reader.ReadBatchBorrowed):
// they are then opened out of it, without a copy into the worker's
// buffers first.
type borrowingReceiver interface {
	ReadBatchBorrowed(msgs []underlay.Message) (int, error)
}

// read reads a batch from the socket into the worker's buffers, or into
// the socket's own where it lends them.
func (w *receiver) read() (int, error) {
	for i := range w.msgs {
		w.msgs[i] = underlay.Message{Buf: w.full[i], Off: sa.Headroom}
	}
	if w.borrow != nil {
		return w.borrow.ReadBatchBorrowed(w.msgs)
	}
	return w.r.ReadBatch(w.msgs)
}

func (w *receiver) setReadDeadline(t time.Time) { w.r.SetReadDeadline(t) }

// handle opens the n packets read and writes those that pass into the
// interface their SA's if_id names, each through the queue of its flow.
// Drops are counted by OpenBatch, and packets for an if_id without an
// interface as XfrmInNoPols.
func (w *receiver) handle(n int) {
	pkts := w.pkts[:n]
	for i := range pkts {
		p, m := &pkts[i], &w.msgs[i]
		// The packet is opened into the worker's buffer: in place if it
		// was read there, else from where the socket lent it (which
		// checked that it fits).
		if &m.Buf[0] == &w.full[i][0] {
			p.Buf, p.Off, p.Len, p.Src = m.Buf, m.Off, m.Len, nil
		} else {
			p.Buf, p.Off, p.Len, p.Src = w.full[i], sa.Headroom, m.Len, m.Data()
		}
		// How the packet came in: Open refuses it for an SA of the
		// other encapsulation (XfrmInStateMismatch).
		p.UDP = !m.Raw
	}
	w.open.open(w.e.sad, pkts)

	// Each packet's queue on its interface (see flowQueue), computed
	// once; a batch normally holds one interface's packets.
	var lastID uint32
	queues := 0
	for i := range pkts {
		p := &pkts[i]
		if p.Drop != sa.CounterNone || p.SA == nil {
			continue
		}
		if id := p.SA.IfID(); id != lastID || queues == 0 {
			lastID, queues = id, 1
			if ifc := w.e.reg.Lookup(id); ifc != nil {
				queues = ifc.NumQueues()
			}
		}
		w.queue[i] = flowQueue(p.Data(), queues)
	}

	// Deliver per interface and queue, keeping the order packets arrived
	// in: a pass per (interface, queue) the batch holds.
	counters := w.e.sad.Counters()
	for i := range pkts {
		p := &pkts[i]
		if p.Drop != sa.CounterNone || p.SA == nil {
			continue
		}
		ifID, q := p.SA.IfID(), w.queue[i]
		out := w.out[:0]
		for j := i; j < n; j++ {
			r := &pkts[j]
			if r.Drop == sa.CounterNone && r.SA != nil && r.SA.IfID() == ifID && w.queue[j] == q {
				// The TUN writes its virtio-net header in front of
				// the packet: xfrmif.MinOffset bytes of the headroom.
				out = append(out, r.Buf[r.Off-xfrmif.MinOffset:r.Off+r.Len])
				r.SA = nil // delivered (or dropped below)
			}
		}
		ifc := w.e.reg.Lookup(ifID)
		if ifc == nil {
			// An SA whose if_id has no interface: no policy lets
			// the packet in.
			for range out {
				counters.Inc(sa.XfrmInNoPols)
			}
			continue
		}
		if _, err := ifc.WriteQueue(q, out, xfrmif.MinOffset); err != nil {
			w.e.log.WithError(err).WithField("interface", ifc.Name()).Debug("interface write")
		}
	}
	for i := range pkts {
		pkts[i].Buf, pkts[i].Src, pkts[i].SA = nil, nil, nil
	}
	for i := range w.msgs[:n] {
		w.msgs[i].Buf = nil // may be the socket's, lent until the next read
	}
	clear(w.out[:cap(w.out)])
}
