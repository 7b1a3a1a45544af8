// Package stack links ipsecd into a Go program as a sidecar: a gVisor
// netstack whose only way out is ESP, so a program can dial and listen
// through a tunnel with no root, no TUN device and no kernel ESP.
//
// It owns the netstack side of the daemon's data plane (docs/design.md, "one
// data plane"): an ESP link endpoint, which is both gVisor's
// stack.LinkEndpoint for the netstack's one NIC and the single queue of an
// xfrmif.Link, and the embedding API (New, DialContext, ListenTCP, DialUDP,
// ...), shaped after the standard library's net package and wireguard's
// tun/netstack. New builds a node (package node), the composition root
// the daemon (package daemon) builds on too (SAD, registry, underlay,
// engine, lifetime ticker, key-use memory, state directory), with the
// netstack where a TUN would be. Package stack/stackfile builds a Net
// from a daemon config file, and package stack/stackike runs IKEv2 for
// one (on its Node); stack itself links neither the YAML decoder nor the
// IKE engine (TestImportsNoConfigOrIKE):
//
//	app ─► netstack ─► WritePackets ─► queue ─► Read (GSO split, copy) ─► datapath: seal, UDP GSO send
//	app ◄─ netstack ◄─ GRO, flush per batch ◄─ Write (copy) ◄─ datapath: UDP GRO read, open
//
// # Outbound
//
// The endpoint advertises host GSO, as a virtio NIC with TSO would: TCP
// hands it super-packets of up to 64 KiB with a partial checksum.
// WritePackets only queues them, taking a reference; the datapath's send
// worker reads the queue in batches of up to 128 packets, and the
// segmenter splits each super-packet into MSS-sized segments while copying
// it into the worker's buffers, at the headroom sa.SealBatch needs: per
// segment it sets the IP total length, the IPv4 id (incremented) and
// header checksum, the TCP sequence number, the flags (FIN and PSH on the
// last segment only, CWR on the first only) and the TCP checksum with its
// pseudo-header, as Linux's tcp_gso_segment does. The batch is then sealed
// in place and sent with one underlay write (UDP GSO for runs of equal
// size), exactly as for a TUN.
//
// # Inbound
//
// The datapath's receive worker opens a batch and writes it to the queue;
// Write copies each packet into a buffer.View of its own and passes it up
// through gVisor's GRO, flushed once per batch. The endpoint claims RX
// checksum offload: the ESP ICV already authenticated each packet, and GRO
// needs it to coalesce.
//
// # Buffers at the netstack boundary
//
// What WritePackets receives is borrowed: it keeps a packet only with a
// reference of its own (IncRef), dropped once the packet is copied out (or
// when the endpoint closes). The payload is shared copy-on-write with
// TCP's retransmit queue, so it is never written: the segmenter reads it
// and writes only into the datapath's buffer. Inbound, the PacketBuffer
// made for a packet ends in exactly one DecRef after GRO took what it
// needs; the datapath keeps its buffers.
//
// Copies: one per packet each way. Outbound, netstack's packet into the
// datapath's buffer (where the segment is then checksummed and sealed in
// place); inbound, the opened packet into a View (the netstack then owns
// it). Nothing else is copied, and in steady state nothing is allocated
// either way (the inbound View and PacketBuffer come from gVisor's pools;
// TestEndpointOutboundAllocs and TestEndpointInboundAllocs hold it to 0).
//
// # Concurrency
//
// A Net is safe for concurrent use. Its goroutines are the datapath's:
// one send worker (the queue's reader) and one receive worker per underlay
// socket, plus netstack's own (TCP's processors, timers) and a
// once-a-second lifetime ticker. WritePackets runs on netstack's
// goroutines and meets the send worker at one mutex per batch; Write is
// serialised by xfrmif per queue, and by the endpoint's own lock.
//
// One queue, one send worker: the TUN has one worker per queue because the
// kernel spreads flows over queues, but netstack's TCP, not the link, is
// the bottleneck (it spends more per byte than seal and copy together), and
// spreading flows over several queues would need netstack's fifo qdisc and
// its goroutines, a second hand-off on the path.
//
// Close closes every connection and listener, stops every goroutine above
// and closes the underlay socket.
//
// # Configuration
//
// An SA names its peer's UDP port (Encap), so two netstacks that bind port
// 0 learn each other's port only once both are up (UnderlayAddr): give
// them SAs then, through AddState, as the tests do. Lifetime events are
// logged to Config.Log by the node's ticker, never on the data path. Config.IfID
// and the states' and policies' if_id must agree (0 takes the netstack's).
//
// Transport mode carries what netstack sends from and to its own address,
// which must then be the SA's outer address, under package sa's rules
// (its package doc, "Modes"): no IP fragments, so in transport mode a UDP
// datagram must fit the MTU (TCP always does); tunnel mode carries
// fragments whole and has no such limit.
package stack
