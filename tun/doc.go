// Package tun opens the TUN devices that carry ipsecd's cleartext side: one
// network interface with one or more queues, through
// golang.zx2c4.com/wireguard/tun with offloads on (virtio-net header, TSO and
// USO super-packets split on read, TCP and UDP GRO coalescing on write,
// batches of up to 128 packets). The data path reads a queue with
// ReadFrame instead (frame_linux.go): the frame as the kernel hands it
// out, which it cuts in place (internal/gso), saving Read's copy of every
// segment.
//
// Multiqueue: wireguard/tun has none, so Open creates the device with
// IFF_MULTI_QUEUE and attaches N file descriptors to it. The kernel spreads
// flows over the queues by hash, so each flow is read from one queue: this
// is ipsecd's emulation of RSS, one worker per queue.
//
// Idle queues are cheap (queue_linux.go): a queue becomes a wireguard/tun
// device (CreateUnmonitoredTUNFromFD, which sets TUNSETOFFLOAD: TSO, USO
// and checksum offload) only when its first packet comes, read or written.
// Until then it is its descriptor waiting in the poller, and the device's
// 64 KiB read buffer and GRO tables (about 1.9 MiB of heap, 800 KiB of
// RSS, a queue) are not allocated: 1,000 idle interfaces took 148 MiB of
// RSS with them, 53 MiB without. With Options.Monitor, queue 0 is made at
// once, as wireguard's CreateTUNFromFile does.
//
// The link is configured over rtnetlink (MTU, up, addresses, routes)
// through github.com/vishvananda/netlink, with no `ip` subprocess. A Device
// keeps a share of the netlink sockets of the network namespace it was
// created in (at most 64 sockets a namespace, shared by all its Devices and
// Guards), so it can be reconfigured and removed from any goroutine later,
// whatever namespace that goroutine's thread is in, at the cost of one
// descriptor per queue and no more.
//
// Guards (guard.go) are the routes that stand in for a device's routes once
// the device is gone: `unreachable` routes of the same prefixes with the
// worst metric, marked proto GuardProto, which outlive the process so that
// a crash never lets the tunnel's traffic leave in clear by another route
// (docs/design.md, "Fail closed"). Guards lists, adds and removes them.
//
// Buffers and offsets: Read and Write on a Queue take a batch and an offset;
// Write needs an offset of at least MinOffset bytes, where the virtio-net
// header is put. A queue also takes one packet gathered from several
// buffers in one writev (WriteGather, gather_linux.go): the receive path's
// TCP super-packets, made of the segments where they were opened
// (package internal/gro), so that wireguard/tun's GRO, which copies the
// payloads together and checksums every segment, is not used on that path. A Queue's Read must not be called from two goroutines at
// once (it would serialise); Write is serialised per queue inside
// wireguard/tun and is safe from several goroutines.
//
// Linux only; elsewhere Open returns ErrNotSupported.
package tun
