package tun

import (
	"errors"
)

// MinOffset is the smallest offset a Queue's Write accepts: the virtio-net
// header (struct virtio_net_hdr, 10 bytes) is written in front of each
// packet. Reads need no offset, but callers read at the same headroom they
// will need to seal in place.
const MinOffset = 10

// MaxQueues is the most queues one device can have (the kernel's
// MAX_TAP_QUEUES).
const MaxQueues = 256

// MaxPacketSize is the largest packet a Queue's Read can return in one
// buffer: a super-packet before segmentation is at most 64 KiB.
const MaxPacketSize = 65535

var (
	// ErrNotSupported is returned by Open on platforms without TUN
	// multiqueue and offload support. Use a netstack link instead.
	ErrNotSupported = errors.New("tun: not supported on this platform")

	// ErrClosed is returned by configuration methods of a closed Device.
	ErrClosed = errors.New("tun: device closed")
)

// Queue is one queue of a device, as golang.zx2c4.com/wireguard/tun.Device
// exposes it; any wireguard tun.Device satisfies it.
type Queue interface {
	// Read reads one or more packets into bufs, each starting at offset,
	// sets sizes and returns how many. len(bufs) must be at least
	// BatchSize(), and each buffer must hold offset+MaxPacketSize bytes
	// when offloads are off, or offset plus the device MTU when they are
	// on.
	Read(bufs [][]byte, sizes []int, offset int) (n int, err error)
	// Write writes the packets bufs[i][offset:]; offset must be at least
	// MinOffset. It may coalesce packets (GRO) and overwrites the bytes in
	// front of offset. The caller keeps ownership of bufs.
	Write(bufs [][]byte, offset int) (int, error)
	// BatchSize is the largest batch Read returns and Write takes at once.
	BatchSize() int
}
