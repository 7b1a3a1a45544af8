// Package xfrmif holds ipsecd's xfrm interfaces: the cleartext side of a
// tunnel, as Linux's xfrm interfaces (ip link add ... type xfrm if_id N)
// are. An Interface owns its link (a multiqueue TUN device, or any Link,
// such as a netstack NIC or a test double), its MTU, addresses and routes,
// and per-interface counters.
//
// Outbound, a packet read from interface X may only use policies and SAs
// that carry X's if_id; inbound, after ESP open, the SA's if_id picks the
// interface the packet comes out of. The Registry maps if_id to Interface
// in a hash map behind an atomic pointer, replaced whole on change, so
// Lookup is lock-free, allocation-free and costs the same with 1 or 100,000
// interfaces (Linux "xfrm interface: use hash to store xfrmi contexts",
// 2020: a list walk cost a quarter of the throughput at 400 interfaces).
//
// An Interface is the queue abstraction only: ReadQueue and WriteQueue move
// batches through one queue and count them; the loops that read each queue
// and seal what they read belong to package datapath. A queue that takes
// gathered writes (a TUN queue) gets WriteQueue's batch as TCP
// super-packets coalesced here (gather.go, package internal/gro) without a
// payload copy; any other queue (a netstack NIC) gets it as it is.
//
// Concurrency: Registry and Interface are safe for concurrent use. Each
// queue of an Interface is read by one goroutine (ReadQueue); writes
// (WriteQueue) are serialised per queue.
package xfrmif
