// Package ikenode runs the IKE daemon: a Daemon drives package ike's
// engine over the network and installs what it negotiates into a
// node.Node.
//
// One goroutine (Daemon.Run) owns every ike.SA, since the engine is not
// safe for concurrent use. Everything else reaches it over bounded
// channels: datagrams from the IKE sockets (ike.port, default 500) and
// from the underlay's ESP-in-UDP socket (port 4500, IKE after the non-ESP
// marker, handed over by node.Node.SetNonESPHandler), control requests (list,
// initiate, terminate, rekey, reload), and a ticker that drives the
// engine's retransmissions and the daemon's timers: rekeys with
// strongSwan's jitter, the children's hard lifetimes, liveness checks
// (dpd_delay) and NAT keepalives. A full queue drops the datagram and
// counts it: the underlay's receive path never waits for IKE.
//
// Messages go to the SA their IKE SPIs name; an IKE_SA_INIT request for
// none passes ike.Cookies and then ike.Respond with the first connection
// whose local_addrs and remote_addrs admit the addresses. What peers make
// the daemon hold is bounded (limits.go): half-open responder SAs from
// one address (ike.block_threshold) and in all (ike.init_limit_half_open)
// before they authenticate, the IKE SAs of one connection with one peer
// identity (ike.max_ike_sas_per_peer) after. A connection's unique keep
// and replace act as a peer authenticates (unique.go), INITIAL_CONTACT
// when its SA is up (contact.go).
//
// A connection has several children (swanctl's), all under its one IKE
// SA: the first in IKE_AUTH, each other by its own CREATE_CHILD_SA, queued
// one exchange at a time. Each is initiated, rekeyed, terminated and
// listed on its own (Target.Child), and start_action and dpd_action are
// each child's (config.StartAction, config.DPDAction).
//
// # Children in the SAD
//
// A child's pair is installed under node.OwnerIKE with the child's if_id,
// exactly the negotiated traffic selector sets (every range, protocol
// and port; ike.SATS is the one conversion, selectorsOf makes the SAs'
// selectors of it, and a set the SAD cannot hold exactly leaves the
// child out, never wider) and, when UDP encapsulated, the ports IKE
// moved to. What goes in and when (make-before-break) is the engine's to
// say, and the daemon follows its events; it keeps only the ids of what
// it installed and its timers:
//
//   - we rekeyed: the answer means the peer's new inbound SA is in, so
//     the new pair goes in at once (EventChildUp) and its outbound SA,
//     the newest, carries the traffic; the old pair goes when its delete
//     completes (EventChildDown);
//   - the peer rekeyed: only the new inbound SA goes in when we answer
//     (EventChildUp, InboundOnly: the peer may not have our answer yet,
//     and would drop what we sent on the new SA); the new outbound SA
//     goes in (EventChildOutbound), and the old pair out, when the peer
//     deletes the old child; child_rekeyed is reported then;
//   - both at once: the redundant child gets its inbound SA alone, and
//     is gone at its maker's delete; nothing is reported of it.
//
// An SPI the engine allocated and will not use is released when it says
// so (EventSPIUnused); an IKE rekey moves the children to the new SA
// (EventChildMoved).
//
// start_action trap and dpd_action trap install an allow out policy for
// the child and initiate on the data path's acquire (Acquire), when the
// node raises acquires (Config.Trap); otherwise they act as none and
// clear. See trap.go.
//
// A road warrior's routes (a connection with vips) follow its children:
// each prefix of a child's negotiated remote traffic selectors is
// routed into its interface from the virtual IP once the child is
// installed, held by every child that has it, and removed with the last
// (routes.go); the kernel's side is the Config.Router's.
//
// Time and the IKE port are injected (Config.Clock, Config.Transport):
// the daemon's are the system clock and UDP sockets (UDP); the tests run
// IKE daemons on a manual clock and an in-memory network.
//
// Without a raw ESP socket in the underlay every connection forces UDP
// encapsulation (strongSwan's encap = yes), since raw ESP could not be
// carried.
package ikenode
