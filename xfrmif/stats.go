package xfrmif

import "sync/atomic"

// Stats are an interface's counters, as `ip -s link` shows them. rx is
// what comes out of the interface to the host (opened ESP, delivered by
// WriteQueue); tx is what the host sends into it (read by ReadQueue, to be
// sealed).
type Stats struct {
	RxPackets, RxBytes, RxErrors, RxDrops uint64
	TxPackets, TxBytes, TxErrors, TxDrops uint64
}

// statShard is one queue's counters, alone on its cache lines so that
// workers on different queues never share one.
type statShard struct {
	_                                     [64]byte
	rxPackets, rxBytes, rxErrors, rxDrops atomic.Uint64
	txPackets, txBytes, txErrors, txDrops atomic.Uint64
}

// Stats sums the counters of every queue. Each counter is exact, but they
// are read one at a time, not as one snapshot.
func (ifc *Interface) Stats() Stats {
	var st Stats
	for i := range ifc.shards {
		s := &ifc.shards[i]
		st.RxPackets += s.rxPackets.Load()
		st.RxBytes += s.rxBytes.Load()
		st.RxErrors += s.rxErrors.Load()
		st.RxDrops += s.rxDrops.Load()
		st.TxPackets += s.txPackets.Load()
		st.TxBytes += s.txBytes.Load()
		st.TxErrors += s.txErrors.Load()
		st.TxDrops += s.txDrops.Load()
	}
	return st
}

// QueueStats returns the counters of each queue, indexed by queue, so
// that the spread of flows over queues (the RSS emulation) can be seen;
// their sum is what Stats returns. tx of queue q is what queue q's worker
// read; rx is what was written through queue q. Each counter is exact, but
// they are read one at a time, not as one snapshot: a caller that shows
// both per-queue counters and totals should sum these rather than call
// Stats too.
func (ifc *Interface) QueueStats() []Stats {
	out := make([]Stats, len(ifc.shards))
	for i := range ifc.shards {
		s := &ifc.shards[i]
		out[i] = Stats{
			RxPackets: s.rxPackets.Load(), RxBytes: s.rxBytes.Load(), RxErrors: s.rxErrors.Load(), RxDrops: s.rxDrops.Load(),
			TxPackets: s.txPackets.Load(), TxBytes: s.txBytes.Load(), TxErrors: s.txErrors.Load(), TxDrops: s.txDrops.Load(),
		}
	}
	return out
}

// Add returns the sum of st and o, counter by counter.
func (st Stats) Add(o Stats) Stats {
	return Stats{
		RxPackets: st.RxPackets + o.RxPackets, RxBytes: st.RxBytes + o.RxBytes, RxErrors: st.RxErrors + o.RxErrors, RxDrops: st.RxDrops + o.RxDrops,
		TxPackets: st.TxPackets + o.TxPackets, TxBytes: st.TxBytes + o.TxBytes, TxErrors: st.TxErrors + o.TxErrors, TxDrops: st.TxDrops + o.TxDrops,
	}
}

// CountTxDrops counts n packets read from queue q that were dropped (no
// policy or SA, policy block, seal failure): the worker's verdict.
func (ifc *Interface) CountTxDrops(q, n int) { ifc.shards[q].txDrops.Add(uint64(n)) }

// CountTxErrors counts n transmit errors on queue q (underlay send
// failures).
func (ifc *Interface) CountTxErrors(q, n int) { ifc.shards[q].txErrors.Add(uint64(n)) }

// CountRxDrops counts n inbound packets for this interface dropped before
// WriteQueue (inner policy check failed, no room).
func (ifc *Interface) CountRxDrops(q, n int) {
	ifc.shards[q%len(ifc.shards)].rxDrops.Add(uint64(n))
}
