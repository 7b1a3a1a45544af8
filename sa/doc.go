// Package sa holds security associations and the ESP codec (RFC 4303): the
// security association database (SAD), the security policy database (SPD),
// sealing and opening of ESP packets in batches, anti-replay, lifetimes and
// the Linux xfrm counters. It does no I/O and starts no goroutines.
//
// Buffers: a batch is a []Packet. Each Packet names a region of a buffer
// that the caller owns; Seal and Open work in place inside that buffer, so
// it must have Headroom bytes before the packet and Tailroom bytes after it.
// Nothing on the seal or open path allocates. SealSegments is one
// exception to in place: it seals the segments of one super-packet from
// the buffer they lie in (Segments lays each out there in turn, headers in
// front of its payload) into the packets' own buffers, so that the
// segments are never copied; the AEAD reads one buffer and writes the
// other. Open is the other: it can read the packet from another buffer
// (Packet.Src: a receive buffer that holds many packets, which is not
// copied out first) and write the plaintext into the Packet's own as if it
// had opened it there.
//
// Modes (RFC 4303 §3.1): tunnel mode carries a whole inner packet, whatever
// it is, an IP fragment included. Transport mode strips the IP header and
// the peer rebuilds one from the SA's outer addresses (the underlay builds
// the outer header; ipsecd never sends the inner one), so it carries only
// what that rebuilt header describes truthfully, and SealBatch (and
// SealSegments) and OpenBatch refuse the rest (XfrmOutStateModeError, XfrmInStateModeError):
//   - whole datagrams only. Linux applies transport-mode xfrm to a whole
//     datagram and fragments the ESP packet afterwards, so an IPv4 fragment
//     (MF set or a non-zero offset) or an IPv6 packet with a fragment
//     header is never sealed, and the rebuilt header has zero fragment
//     fields. Length fields must agree with the packet (IPv4 total length,
//     IPv6 payload length, UDP length, TCP data offset).
//   - IPv6 extension headers: RFC 4303 §3.1.1 puts ESP after hop-by-hop,
//     routing and fragment headers, which would have to stay in an outer
//     header ipsecd does not send, so packets with them are refused (and
//     after a rebuilt header, where hop-by-hop is not even allowed).
//     Destination options may go either side of ESP: they travel inside it.
//   - IPv4 options are stripped with the header; the rebuilt one has none.
//   - the SA's family only: an IPv4 SA seals IPv4 packets, an IPv6 SA IPv6.
//
// Selectors (selector.go): an SA's Selector is a prefix pair, or, for
// the traffic selectors IKE negotiates when they are not one prefix each
// side, a TSSet of address ranges with protocols and ports. OpenBatch
// drops an opened packet outside it (XfrmInStateMismatch) and LookupOut
// finds an SA only for packets inside it, both without allocating; a
// port range admits no packet whose ports cannot be read (fragments).
//
// Rules (check.go): every rule of an SA and a policy is written here, with
// the table of algorithms (algorithms.go). New and the SAD apply them; the
// config file, the control socket and the command line map their syntax
// to a Config or Policy and call Check or CheckPolicy, whose FieldErrors
// name fields as the config file does (aead.key, replay_window).
//
// Sequence numbers (seq.go): an outbound SA may resume above a persisted
// mark and reserve its numbers through a SeqReserver (package seqstate
// keeps them on disk), at the cost of one compare per batch, so that a
// restart never reuses an AEAD nonce; an inbound SA may resume its replay
// window at a persisted top. A counter that reaches its end (2^32-1
// without ESN, 2^64-2^32 with) refuses every later packet.
//
// Concurrency: an SA, the SAD and the SPD are safe for concurrent use. Many
// workers may seal or open packets of one SA at once: outbound sequence
// numbers come from an atomic add, and an inbound packet takes the SA's lock
// once, after its ICV verified, to advance the replay window and count it
// (Linux's lesson "xfrm: Refactor xfrm_input lock to reduce contention with
// RSS"). Crypto runs outside any lock. A Packet, and the batch it is in,
// belongs to one goroutine at a time.
package sa
