// Package datapath moves packets between the xfrm interfaces and the
// underlay through the SAD: the daemon's forwarding engine.
//
//	transmit: interface queue ─► SAD.LookupOut(if_id) ─► SA.SealBatch ─► underlay
//	          TUN queue (a frame) ─► gso.Frame ─► SAD.LookupOutSegments ─► SA.SealSegments ─► underlay
//	receive:  underlay reader ─► SAD.OpenBatch ─► registry.Lookup(SA.if_id) ─► interface
//
// Both loops live here, one per file (transmit.go, receive.go), and run
// the same way (worker.go): each interface queue has one transmitting
// worker (routineTransmit) and each underlay socket one receiving worker
// (routineReceive), which may open its batches on several goroutines (see
// openers) and delivers them in arrival order. The Engine starts them all
// and Wait waits for them all. A worker owns its buffers and batch state,
// allocated once when it starts (batchBuffers; the packet buffers mapped
// outside the Go heap on Linux, newSlab, and unmapped when the worker
// ends); in steady state nothing is allocated per packet. A failed read is logged at debug level (an
// interface queue counts it as a tx error too), and a worker pauses after
// a run of them rather than spin (backoff). The interfaces and the underlay
// only move batches: xfrmif.Interface's ReadQueue and WriteQueue, and the
// Underlay interface, which datapathtest.Pipe fakes.
//
// A TUN queue (xfrmif's ReadsFrames) is read a frame at a time instead:
// a TCP or UDP super-packet stays whole in one buffer, each segment's
// headers are written in front of its payload there (gso.Frame), and
// SealSegments encrypts it from there into the batch buffer it is sent
// from, so no segment is copied; its segments share one SA lookup.
//
// Other packets are sealed and opened in the buffer they were read into,
// except the packets of a coalesced UDP datagram (GRO), which the socket
// lends (underlay.Reader.ReadBatchBorrowed) and which are opened out of
// its buffer into the worker's (sa.Packet.Src): no copy first. The order
// of the packets in a batch is kept, so each flow's order is kept as
// long as it stays on one queue or socket; inbound packets go to the queue
// of their flow (flowQueue).
package datapath
