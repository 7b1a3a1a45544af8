// Package datapath moves packets between the xfrm interfaces and the
// underlay through the SAD: the daemon's forwarding engine.
//
//	send:    interface queue ─► SAD.LookupOut(if_id) ─► SA.SealBatch ─► underlay
//	receive: underlay reader ─► SAD.OpenBatch ─► registry.Lookup(SA.if_id) ─► interface
//
// Each interface queue has one sending worker and each underlay socket one
// receiving worker, which may open its batches on several goroutines (see
// openers) and delivers them in arrival order. A worker owns its buffers
// and batch state, allocated once when it starts; in steady state nothing
// is allocated per packet. Packets are sealed and opened in the buffer
// they were read into, and the order of the packets in a batch is kept, so
// each flow's order is kept as long as it stays on one queue or socket;
// inbound packets go to the queue of their flow (flowQueue).
package datapath
