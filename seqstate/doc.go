// Package seqstate keeps, across restarts of the process, how far each
// static key's sequence numbers went, so that a restarted ipsecd never
// seals two packets with one (key, nonce) pair and never accepts its
// peer's old packets again.
//
// Why: AES-GCM (RFC 4106 §3.1) and ChaCha20-Poly1305 (RFC 7634 §2) take
// their nonce from the ESP sequence number, and "MUST NOT" use one twice
// under a key: two GCM packets under one nonce give away the XOR of their
// plaintexts and, with a few more, the authentication key. An SA that
// starts again at sequence number 1 after a restart with the same
// configured key does exactly that. Linux does, with manual keys.
//
// What it owns: the state directory (the config's state_dir, by default
// /var/lib/ipsecd). The directory is created 0700 and refused if group or
// others may write to it or another user owns it. It holds:
//
//   - secret: 32 random bytes (mode 0600), made once per directory. It
//     keys an HMAC-SHA-256 over each key's algorithm names and key
//     material; the hex digest names the key's record. No key, and no
//     unkeyed hash of one (which would let anyone holding a candidate key
//     confirm it), is ever written.
//   - one record per key (not per SPI: a key copied under another SPI
//     continues above the old reservation), named <digest>.seq, 64 bytes:
//     two 32-byte slots, each magic "IPSQ", CRC-32C, generation, outbound
//     reservation, inbound top. An update writes the slot the previous
//     generation does not use (pwrite) and fsyncs, so that a write torn by
//     a crash leaves the other slot, the last one acknowledged, intact; a
//     reader takes the valid slot of the highest generation. A record is
//     created by writing a temporary file, fsync, rename and an fsync of
//     the directory. Updates avoid rename: the inbound tops are written
//     up to ten times a second per SA, and an in-place slot write costs
//     one fsync where a rename costs two.
//
// Outbound: the SA's first packet after a restart carries a number above
// both the key's last outbound reservation and the inbound top recorded
// for the same key (a key whose direction was swapped across a restart
// does not start at 1 either). Numbers are reserved in blocks, written
// and synced before the first number of a block is used: ESNBlock with
// ESN (a restart skips at most 2^24 of 2^64 numbers), Block without ESN
// (2^18: sixteen thousand restarts before the 2^32 numbers of an SA run
// out; at a million packets a second, one write every quarter second).
//
// Inbound: the window's top is written off the packet path, by
// RoutineSaveTops every SaveInterval (100 ms) when it changed, and once
// more on a clean stop (Flush). After a restart the window starts at the
// saved top with every number at or below it counted as seen, so the
// peer's next packets are accepted at once. The bound: packets the peer
// sent in the last SaveInterval before a crash (at most the packets
// received in that interval) could be replayed once into the restarted
// side.
//
// A Dir is safe for concurrent use. Nothing here runs on the per-packet
// path except a Reserve, once per block.
package seqstate
