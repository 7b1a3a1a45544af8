package datapath

import (
	"context"
	"time"

	"github.com/ipsecd/ipsecd/internal/gso"
	"github.com/ipsecd/ipsecd/internal/vnet"
	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/underlay"
	"github.com/ipsecd/ipsecd/xfrmif"
)

// A TUN reads its virtio-net header in front of the packet and writes it
// there: the headroom left for ESP must hold it.
const _ = uint(sa.Headroom - xfrmif.MinOffset)

// A frame's tailroom takes the ESP trailer SealSegments writes behind
// each segment.
const _ = uint(gso.Tailroom - sa.TrailerRoom)

// frameBufSize is the buffer a queue that ReadsFrames is read into: the
// largest frame (virtio-net header and a 64 KiB super-packet) and the
// last segment's trailer.
const frameBufSize = vnet.HeaderLen + xfrmif.MaxPacketSize + gso.Tailroom

// transmitter is the worker of one interface queue: it reads cleartext
// packets from the queue, seals them with their SAs and sends the ESP
// packets through the underlay. It is used by one goroutine.
type transmitter struct {
	e   *Engine
	ifc *xfrmif.Interface
	q   int

	packetSize int      // the largest packet the buffers hold
	full       [][]byte // every packet's whole buffer, allocated once, with the first traffic
	free       func()   // frees full's slab; nil before
	bufs       [][]byte // what the queue reads into: full, resliced
	sizes      []int
	pkts       []sa.Packet
	msgs       []underlay.Message

	// A queue that ReadsFrames (a TUN) is read a frame at a time into
	// frameBuf; its segments are sealed from there into full
	// (SealSegments), never copied.
	frames   bool
	frameBuf []byte
	frame    gso.Frame
}

// newTransmitter makes queue q's worker. Its buffers, allocated once with
// the queue's first traffic (allocate), each hold a packet of up to
// packetSize bytes at sa.Headroom, with sa.Tailroom behind it, so that it
// is sealed in place.
func newTransmitter(e *Engine, ifc *xfrmif.Interface, q, packetSize int) *transmitter {
	if packetSize <= 0 {
		packetSize = xfrmif.MaxPacketSize
	}
	return &transmitter{e: e, ifc: ifc, q: q, packetSize: packetSize}
}

// allocate makes the buffers, once the queue has traffic (xfrmif's
// WaitQueue): 128 of the MTU are 190 KiB, which 10,000 mostly idle
// interfaces would otherwise hold. A queue that ReadsFrames gets a frame
// buffer (64 KiB) too, and no bufs or sizes, which only ReadQueue fills.
func (w *transmitter) allocate() {
	batch := w.ifc.QueueBatchSize(w.q)
	w.full, w.free = batchBuffers(batch, sa.Headroom+w.packetSize+sa.Tailroom)
	w.pkts = make([]sa.Packet, batch)
	w.msgs = make([]underlay.Message, 0, batch)
	if w.ifc.ReadsFrames(w.q) {
		w.frames = true
		w.frameBuf = make([]byte, frameBufSize)
		return
	}
	w.bufs = make([][]byte, batch)
	w.sizes = make([]int, batch)
}

// routineTransmit is the worker of queue q of ifc until ctx is done or
// the interface is closed; its buffers hold packets up to packetSize.
// It counts itself out of both wait groups when it returns.
func (e *Engine) routineTransmit(ctx context.Context, ifc *xfrmif.Interface, q, packetSize int, ifcWorkers *Workers) {
	defer e.wg.Done()
	defer ifcWorkers.wg.Done()
	w := newTransmitter(e, ifc, q, packetSize)
	run(ctx, w, e.log.WithField("interface", ifc.Name()).WithField("queue", q))
	if w.free != nil {
		w.free() // run returned: the sends and seals into full are done
	}
}

// read reads a batch from the queue (counted there as tx).
func (w *transmitter) read() (int, error) {
	if w.full == nil {
		if err := w.ifc.WaitQueue(w.q); err != nil {
			return 0, err
		}
		w.allocate()
	}
	if w.frames {
		// A segment is sealed into full[i] at sa.Headroom, where
		// ReadQueue would have put it.
		err := w.ifc.ReadQueueFrame(w.q, w.frameBuf, &w.frame, len(w.full), w.packetSize)
		if err != nil {
			return 0, err
		}
		return w.frame.Segments(), nil
	}
	copy(w.bufs, w.full) // the queue may have resliced them
	return w.ifc.ReadQueue(w.q, w.bufs, w.sizes, sa.Headroom)
}

// setReadDeadline sets the queue's deadline; a queue without one (a
// netstack link) is released by the interface's Close instead.
func (w *transmitter) setReadDeadline(t time.Time) { w.ifc.SetReadDeadline(w.q, t) }

// handle seals the n packets read and sends them: packet i is
// w.bufs[i][sa.Headroom:sa.Headroom+w.sizes[i]]. Runs of packets with one
// SA are sealed in one SealBatch. Packets without an SA are dropped:
// LookupOut counts them (fail closed: nothing leaves in clear), and so are
// those the SA refuses; both are tx drops of the queue. A failed send is
// one tx error (the underlay counts each message it could not send).
func (w *transmitter) handle(n int) {
	if w.frames {
		w.handleFrame(n)
		return
	}
	pkts := w.pkts[:n]
	ifID := w.ifc.IfID()
	dropped := 0
	for i := range pkts {
		p := &pkts[i]
		p.Buf, p.Off, p.Len = w.bufs[i], sa.Headroom, w.sizes[i]
		p.SA, p.Drop = w.e.sad.LookupOut(ifID, p.Data())
		if p.SA == nil {
			dropped++
		}
	}

	// Seal runs of packets that share an SA; usually the whole batch.
	for i := 0; i < n; {
		s := pkts[i].SA
		j := i + 1
		for j < n && pkts[j].SA == s {
			j++
		}
		if s != nil {
			s.SealBatch(pkts[i:j])
		}
		i = j
	}

	w.send(pkts, dropped)
}

// handleFrame seals the n segments of the frame read and sends them, as
// handle would after a ReadQueue that split the frame: the segments share
// their addresses, so one lookup finds their SA, and SealSegments reads
// each straight from the frame.
func (w *transmitter) handleFrame(n int) {
	pkts := w.pkts[:n]
	s, _ := w.e.sad.LookupOutSegments(w.ifc.IfID(), w.frame.Packet(), n)
	if s == nil {
		w.ifc.CountTxDrops(w.q, n)
		return
	}
	for i := range pkts {
		p := &pkts[i]
		p.Buf, p.Off, p.Len = w.full[i], sa.Headroom, w.frame.SegmentLen(i)
	}
	s.SealSegments(pkts, &w.frame)
	w.send(pkts, 0)
}

// send sends the sealed packets of pkts (those with an SA and no drop),
// counting the dropped ones and dropped more as tx drops, then forgets
// the buffers and SAs until the next batch.
func (w *transmitter) send(pkts []sa.Packet, dropped int) {
	msgs := w.msgs[:0]
	for i := range pkts {
		p := &pkts[i]
		if p.SA == nil {
			continue
		}
		if p.Drop != sa.CounterNone {
			dropped++
			continue
		}
		msgs = append(msgs, underlay.Message{
			Buf:   p.Buf,
			Off:   p.Off,
			Len:   p.Len,
			Peer:  p.SA.Peer(),
			Local: p.SA.Src(),
			Raw:   p.SA.RawESP(),
		})
	}
	if dropped != 0 {
		w.ifc.CountTxDrops(w.q, dropped)
	}
	if len(msgs) != 0 {
		if err := w.e.conn.WriteBatch(msgs); err != nil {
			// The daemon reports the underlay's count of unsent
			// messages as XfrmOutError.
			w.ifc.CountTxErrors(w.q, 1)
			w.e.log.WithError(err).Debug("underlay write")
		}
	}
	// Drop references to the buffers and SAs until the next batch.
	clear(msgs)
	for i := range pkts {
		pkts[i].Buf, pkts[i].SA = nil, nil
	}
}
