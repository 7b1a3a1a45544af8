// Package sa holds security associations and the ESP codec (RFC 4303): the
// security association database (SAD), the security policy database (SPD),
// sealing and opening of ESP packets in batches, anti-replay, lifetimes and
// the Linux xfrm counters. It does no I/O and starts no goroutines.
//
// Buffers: a batch is a []Packet. Each Packet names a region of a buffer
// that the caller owns; Seal and Open work in place inside that buffer, so
// it must have Headroom bytes before the packet and Tailroom bytes after it.
// Nothing on the seal or open path allocates.
//
// Concurrency: an SA, the SAD and the SPD are safe for concurrent use. Many
// workers may seal or open packets of one SA at once: outbound sequence
// numbers come from an atomic add, and an inbound packet takes the SA's lock
// once, after its ICV verified, to advance the replay window and count it
// (Linux's lesson "xfrm: Refactor xfrm_input lock to reduce contention with
// RSS"). Crypto runs outside any lock. A Packet, and the batch it is in,
// belongs to one goroutine at a time.
package sa
