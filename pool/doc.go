// Package pool hands out virtual IP addresses to remote-access clients
// from address pools (RFC 7296 §3.15's INTERNAL_IP4_ADDRESS and
// INTERNAL_IP6_ADDRESS), as strongSwan's in-memory pools do.
//
// A Pool is a Range of IPv4 or IPv6 addresses: a prefix (10.3.0.0/24,
// whose network and last address are not handed out) or a range
// (10.3.0.10-10.3.0.200, every address of it), at most MaxSize addresses.
// The addresses New is given as reserved (the pool's DNS servers) are
// never handed out, nor restored from a leases file.
// Leases are kept per identity, a string the caller chooses (the EAP
// identity when there is one, else the IKE identity):
//
//   - Acquire gives an identity its offline lease back when it has one,
//     so a client that reconnects gets its address again; else an
//     address never handed out; else the offline lease another identity
//     left longest ago. When none is left it fails with ErrExhausted,
//     naming the pool.
//   - Release (the IKE SA went) makes a lease offline: it stays the
//     identity's until the pool needs the address for someone else.
//
// Acquire and Release take O(1) time in the number of leases (maps, and
// a list of the offline leases in the order they went offline).
//
// A Set is the pools of a config, by name. It saves its leases to one
// file in a directory (the daemon's state_dir) with Flush, whole or not
// at all (internal/atomicfile), and Load reads them back, every lease
// offline, so that a restarted gateway gives clients their addresses
// back. A Pool and a Set are safe for concurrent use.
package pool
