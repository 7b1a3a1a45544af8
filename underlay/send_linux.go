package underlay

import (
	"fmt"
	"net/netip"
	"os"

	"golang.org/x/sys/unix"
)

const (
	// Largest UDP payloads (ESP packets) the kernel takes in one send,
	// which bounds a GSO send: 64 KiB minus the UDP and IPv4 headers
	// (IPv6's payload length does not count its own header).
	maxIPv4Payload = 1<<16 - 1 - 20 - 8
	maxIPv6Payload = 1<<16 - 1 - 8
)

// writeScratch is the sendmmsg state of one WriteBatch call. They are pooled
// (Conn.writePool) so that concurrent writers, e.g. one per TUN queue, never
// share one and the steady state does not allocate.
type writeScratch struct {
	hdrs  [BatchSize]unix.Mmsghdr
	iovs  [BatchSize]unix.Iovec // one per message: GSO gathers segments without copying
	names [BatchSize]unix.RawSockaddrInet6
	oob   []byte         // oobSize per header
	first [BatchSize]int // index of a header's first message in the run
	count [BatchSize]int // messages (segments) in a header
	bytes [BatchSize]int // payload bytes in a header

	// writeFn is s.writeOnce as a func value made once, so that
	// RawConn.Write does not allocate a closure per call.
	writeFn func(fd uintptr) bool
	pending []unix.Mmsghdr
	sent    int
	errno   unix.Errno
}

func newWriteScratch() *writeScratch {
	s := &writeScratch{oob: alignedBytes(BatchSize * oobSize)}
	s.writeFn = s.writeOnce
	return s
}

func (s *writeScratch) writeOnce(fd uintptr) bool {
	for {
		n, errno := sendmmsg(fd, s.pending)
		switch errno {
		case 0:
			s.sent = n
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false // socket buffer full: wait for the poller
		}
		s.errno = errno
		return true
	}
}

// WriteBatch sends each msgs[i].Data() to msgs[i].Peer, on the raw ESP
// socket if msgs[i].Raw, else on the UDP socket of the peer's family. The
// buffers are the caller's again when WriteBatch returns. It is safe for
// concurrent use; messages of one call leave in order.
//
// A message that cannot be sent (no socket for it, or the kernel refuses
// it) is counted in SendErrors and the rest of the batch is still sent;
// the error returned is the first such failure. After Close it wraps
// ErrClosed.
func (c *Conn) WriteBatch(msgs []Message) error {
	s := c.writePool.Get().(*writeScratch)
	defer c.writePool.Put(s)
	var firstErr error
	for i := 0; i < len(msgs); {
		sock := c.socketFor(&msgs[i])
		if sock == nil {
			c.ctr.sendErrors.Add(1)
			if firstErr == nil {
				firstErr = ErrNoSocket
			}
			i++
			continue
		}
		j := i + 1
		for j < len(msgs) && j-i < BatchSize && c.socketFor(&msgs[j]) == sock {
			j++
		}
		if err := c.writeRun(s, sock, msgs[i:j]); err != nil && firstErr == nil {
			firstErr = err
		}
		i = j
	}
	return firstErr
}

// writeRun sends up to BatchSize messages on one socket.
func (c *Conn) writeRun(s *writeScratch, sock *socket, msgs []Message) error {
	var d Counters
	var firstErr error
	noGSOBefore := 0 // messages before this index go out without GSO
	for next := 0; next < len(msgs); {
		nh := s.build(sock, msgs, next, noGSOBefore)
		next = len(msgs)
		for h := 0; h < nh; {
			s.pending, s.sent, s.errno = s.hdrs[h:nh], 0, 0
			if err := sock.rc.Write(s.writeFn); err != nil {
				d.SendErrors += uint64(s.remaining(h, nh))
				c.ctr.add(&d)
				return fmt.Errorf("underlay: write %s: %w", sock.name, err)
			}
			if s.errno == 0 {
				for k := h; k < h+s.sent; k++ {
					d.TxPackets += uint64(s.count[k])
					d.TxBytes += uint64(s.bytes[k])
					if s.count[k] > 1 {
						d.TxGSO += uint64(s.count[k])
					}
				}
				h += s.sent
				continue
			}
			if s.count[h] > 1 && (s.errno == unix.EIO || s.errno == unix.EINVAL || s.errno == unix.EMSGSIZE) {
				// The kernel refused the GSO send: EIO means the device
				// has no checksum offload (give GSO up on this socket);
				// EMSGSIZE (EINVAL before Linux 6.x) a segment larger
				// than the path MTU, which GSO cannot fragment. Resend
				// from this run on, its segments one by one.
				if s.errno == unix.EIO && sock.gso.CompareAndSwap(true, false) {
					c.logf("underlay: %s: UDP GSO disabled: %v", sock.name, s.errno)
				}
				next = s.first[h]
				noGSOBefore = s.first[h] + s.count[h]
				break
			}
			d.SendErrors += uint64(s.count[h])
			if firstErr == nil {
				firstErr = fmt.Errorf("underlay: write %s to %v: %w", sock.name, msgs[s.first[h]].Peer, os.NewSyscallError("sendmmsg", s.errno))
			}
			h++
		}
	}
	c.ctr.add(&d)
	return firstErr
}

func (s *writeScratch) remaining(h, nh int) int {
	n := 0
	for ; h < nh; h++ {
		n += s.count[h]
	}
	return n
}

// build fills s.hdrs with msgs[next:] (all for sock) and returns how many
// headers it made. With GSO, consecutive messages to the same peer from
// the same local address, of the first one's length (the last of a run may
// be shorter), become one header whose iovecs gather them; messages before
// index noGSOBefore get a header each.
func (s *writeScratch) build(sock *socket, msgs []Message, next, noGSOBefore int) int {
	gso := !sock.raw && sock.gso.Load()
	maxPayload := maxIPv4Payload
	if sock.v6 {
		maxPayload = maxIPv6Payload
	}
	nh, iv := 0, 0
	for k := next; k < len(msgs); nh++ {
		m := &msgs[k]
		s.first[nh] = k
		iov0 := iv
		setIovec(&s.iovs[iv], m.Buf[m.Off:m.Off+m.Len])
		iv++
		k++
		count, total, seg := 1, m.Len, m.Len
		if gso && k > noGSOBefore && seg > 0 {
			for k < len(msgs) && count < maxGSOSegments {
				o := &msgs[k]
				if o.Len > seg || o.Len == 0 || o.Peer != m.Peer || o.Local != m.Local || total+o.Len > maxPayload {
					break
				}
				setIovec(&s.iovs[iv], o.Buf[o.Off:o.Off+o.Len])
				iv++
				k++
				count++
				total += o.Len
				if o.Len < seg {
					break // a short segment ends the run
				}
			}
		}
		oob := s.oob[nh*oobSize : (nh+1)*oobSize]
		oobLen := 0
		if count > 1 {
			oobLen += putSegment(oob, seg)
		}
		if sock.pktinfo && m.Local.IsValid() {
			oobLen += putPktinfo(oob[oobLen:], m.Local, sock.v6)
		}
		peer := m.Peer
		if sock.raw {
			peer = netip.AddrPortFrom(peer.Addr(), 0) // raw ESP has no port
		}
		nameLen := putSockaddr(&s.names[nh], peer, sock.v6)
		setMsghdr(&s.hdrs[nh].Hdr, &s.names[nh], nameLen, s.iovs[iov0:iv], oob[:oobLen])
		s.count[nh] = count
		s.bytes[nh] = total
	}
	return nh
}
