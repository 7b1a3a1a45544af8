// Package underlay is ipsecd's outer socket side: it moves ESP packets
// between the daemon and its peers over ESP in UDP (RFC 3948, port 4500) and,
// optionally, over raw IP protocol 50 (RFC 4303). It does no cryptography:
// package sa seals and opens what this package sends and receives.
//
// # Sockets
//
// [Open] binds one UDP socket to Config.UDP. When that address is
// unspecified (0.0.0.0 or ::) it also binds the other family on the same
// port (the IPv6 socket with IPV6_V6ONLY), so IPv4 and IPv6 peers both work.
// With Config.RawESP it adds a raw IPPROTO_ESP socket per family (this needs
// CAP_NET_RAW); IPv4 raw receive includes the IP header, which is stripped
// here, and sends leave the outer header to the kernel (no IP_HDRINCL).
// Every socket carries SO_MARK = Config.Mark (when non-zero), so that the
// daemon's own ESP is never routed back into its own TUN devices.
//
// # Batches and buffers
//
// I/O moves batches of [Message]: recvmmsg and sendmmsg, one system call per
// batch. A Message names the ESP packet (SPI through ICV) inside a buffer the
// caller owns, Buf[Off:Off+Len], so the caller can keep headroom before the
// packet and tailroom after it for sealing and opening in place (sa.Headroom,
// sa.Tailroom). The package keeps no reference to a Message or its buffer
// after a call returns.
//
// On receive, each packet is written at Buf[Off:]; Off is not changed.
// Bytes in the headroom may be overwritten: raw IPv4 receive reads the
// 20-byte IP header into Buf[Off-20:Off] when Off >= 20, so that the common
// case needs no copy.
//
// Each socket has a [Reader]; run one goroutine per Reader
// ([Conn.Readers]). That keeps each socket's packet order and lets the daemon
// run a worker per socket. Writes go through [Conn.WriteBatch], which is safe
// for concurrent use and picks the socket by Message.Raw and the peer's
// address family.
//
// # Offload
//
// Where the kernel has them, UDP sockets use segmentation offload both ways
// (docs/design.md, lesson 3):
//
//   - GSO (UDP_SEGMENT): WriteBatch sends runs of consecutive messages to the
//     same peer, of equal length (the last may be shorter), as one datagram
//     of up to 64 segments. The segments are gathered from the callers'
//     buffers with one iovec each, so nothing is copied. If the kernel
//     answers EIO (no checksum offload on the route's device) GSO is turned
//     off for that socket and the messages are sent one by one; EMSGSIZE or
//     EINVAL on a coalesced send (a segment larger than the path MTU, which
//     GSO cannot fragment) resends just that run without GSO.
//   - GRO (UDP_GRO): the kernel hands up coalesced datagrams of up to 64 KiB
//     with their segment size in a control message. A Reader receives them
//     into its own 64 KiB buffers and copies each segment into the next
//     caller Message (one copy per packet, headroom contract kept). Segments
//     that do not fit the caller's batch are kept for the next ReadBatch.
//     ReadBatchBorrowed skips the copy: it lends the segments where they
//     arrived, until the next read, for a caller that opens them out of
//     the Reader's buffer into its own (the data path does).
//
// # Allocation and concurrency
//
// In steady state neither ReadBatch nor WriteBatch allocates. A Reader is not
// safe for concurrent use; a Conn's WriteBatch, Counters and Close are.
//
// Datagrams that are not ESP are dropped and counted, never handed up: NAT
// keepalives (one 0xFF byte), IKE (a four-byte zero non-ESP marker; see
// Config.NonESP for the hook an IKE daemon would use) and datagrams too
// short to be ESP.
package underlay
