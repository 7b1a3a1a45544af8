package tun

import "github.com/ipsecd/ipsecd/internal/vnet"

// MaxFrameSize is the largest frame ReadFrame returns: the virtio-net
// header and a super-packet of up to MaxPacketSize bytes.
const MaxFrameSize = vnet.HeaderLen + MaxPacketSize

// ReadFrame reads one frame from the queue as the kernel hands it out, the
// virtio-net header and then a packet or a TCP or UDP super-packet, into
// buf (MaxFrameSize bytes suffice), and returns its length. It is for a
// reader that cuts super-packets itself (gso.Frame), in place, instead of
// having Read copy each segment into a buffer of its own. An idle queue
// first waits for a packet (Wait); errors are Read's. It allocates
// nothing; one goroutine reads a queue at a time, by Read or ReadFrame.
func (q *queue) ReadFrame(buf []byte) (int, error) {
	a := q.dev.Load()
	if a == nil {
		if err := q.Wait(); err != nil {
			return 0, err
		}
		a = q.dev.Load()
	}
	// wireguard/tun's own Read is this same read(2) before it splits the
	// frame; the descriptor is non-blocking, in the runtime's poller, so
	// the read deadline holds.
	return a.File().Read(buf)
}
