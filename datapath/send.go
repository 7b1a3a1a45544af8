package datapath

import (
	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/underlay"
	"github.com/ipsecd/ipsecd/xfrmif"
)

// sender is the worker state of one interface queue: the batch of packets
// being sealed and the messages handed to the underlay. It is used by one
// goroutine.
type sender struct {
	e   *Engine
	ifc *xfrmif.Interface
	q   int

	pkts []sa.Packet
	msgs []underlay.Message
}

func newSender(e *Engine, ifc *xfrmif.Interface, q int) *sender {
	return &sender{e: e, ifc: ifc, q: q}
}

// handle seals a batch read from the interface and sends it. Packet i is
// bufs[i][sa.Headroom:sa.Headroom+sizes[i]]; the buffers have sa.Tailroom
// beyond the largest packet. Packets without an SA are dropped: LookupOut
// counts them (fail closed: nothing leaves in clear).
func (w *sender) handle(bufs [][]byte, sizes []int, n int) {
	if cap(w.pkts) < n {
		w.pkts = make([]sa.Packet, n)
		w.msgs = make([]underlay.Message, n)
	}
	pkts := w.pkts[:n]
	ifID := w.ifc.IfID()
	dropped := 0
	for i := range pkts {
		p := &pkts[i]
		p.Buf, p.Off, p.Len = bufs[i], sa.Headroom, sizes[i]
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
	if len(msgs) == 0 {
		return
	}
	if err := w.e.conn.WriteBatch(msgs); err != nil {
		// The underlay counts each message it could not send; the
		// daemon reports those as XfrmOutError.
		w.ifc.CountTxErrors(w.q, 1)
		w.e.log.WithError(err).Debug("underlay write")
	}
	// Drop references to the buffers until the next batch.
	for i := range msgs {
		msgs[i] = underlay.Message{}
	}
}
