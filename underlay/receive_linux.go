package underlay

import (
	"fmt"
	"net/netip"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// groSlots is how many coalesced datagrams one recvmmsg takes with GRO
	// on. Each needs a 64 KiB buffer (the kernel truncates, not splits, a
	// datagram that does not fit), so this is memory (1 MiB per Reader)
	// against packets per system call when traffic does not coalesce (many
	// peers, small flows).
	groSlots = 16
	// groBufSize holds the largest UDP payload.
	groBufSize = 1 << 16
)

// Reader receives from one underlay socket. It is not safe for concurrent
// use: run one goroutine per Reader. Its zero value is not usable; get
// Readers from Conn.Readers.
type Reader struct {
	c    *Conn
	sock *socket

	// The recvmmsg arguments, reused on every call.
	hdrs  []unix.Mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet6
	oob   []byte // oobSize per slot
	vlen  int    // slots to read in the pending system call

	// GRO: datagrams as the kernel coalesced them, and how far splitting
	// them into caller Messages got (slots [groNext:groN] are pending, the
	// first from byte groOff).
	groBufs               [][]byte
	groGSO                []int
	groLocal              []netip.Addr
	groNext, groN, groOff int

	// readFn is r.readOnce as a func value made once, so that
	// RawConn.Read does not allocate a closure per call.
	readFn func(fd uintptr) bool
	got    int
	errno  unix.Errno
}

func newReader(c *Conn, s *socket) *Reader {
	slots := BatchSize
	if s.gro {
		slots = groSlots
	}
	r := &Reader{
		c:     c,
		sock:  s,
		hdrs:  make([]unix.Mmsghdr, slots),
		iovs:  make([]unix.Iovec, slots),
		names: make([]unix.RawSockaddrInet6, slots),
		oob:   alignedBytes(slots * oobSize),
	}
	if s.gro {
		slab := make([]byte, groSlots*groBufSize)
		r.groBufs = make([][]byte, groSlots)
		for i := range r.groBufs {
			r.groBufs[i] = slab[i*groBufSize : (i+1)*groBufSize : (i+1)*groBufSize]
			setIovec(&r.iovs[i], r.groBufs[i])
		}
		r.groGSO = make([]int, groSlots)
		r.groLocal = make([]netip.Addr, groSlots)
	}
	r.readFn = r.readOnce
	return r
}

// BatchSize is the most messages one ReadBatch returns; pass at least this
// many for full batches.
func (r *Reader) BatchSize() int { return BatchSize }

// LocalAddr is the socket's bound address (port 0 for raw ESP).
func (r *Reader) LocalAddr() netip.AddrPort { return r.sock.local }

// Raw reports whether the Reader reads raw ESP rather than ESP in UDP.
func (r *Reader) Raw() bool { return r.sock.raw }

// GRO reports whether the socket receives coalesced UDP datagrams.
func (r *Reader) GRO() bool { return r.sock.gro }

func (r *Reader) String() string { return r.sock.name }

// SetReadDeadline makes a blocked or future ReadBatch return an error
// (os.ErrDeadlineExceeded) at t; the zero time means no deadline.
func (r *Reader) SetReadDeadline(t time.Time) error { return r.sock.pc.SetReadDeadline(t) }

// ReadBatch blocks until at least one ESP packet arrives, then fills
// msgs[:n] and returns n (at most BatchSize). Each packet is written at
// msgs[i].Buf[msgs[i].Off:], and Len, Peer, Local and Raw are set; Off is
// left as it was. Keepalives, IKE and malformed datagrams are counted and
// not returned, and neither is a packet larger than its buffer. The
// caller's buffers are its own again when ReadBatch returns.
//
// The error is from the socket: after Close it wraps ErrClosed.
func (r *Reader) ReadBatch(msgs []Message) (int, error) {
	return r.readBatch(msgs, false)
}

// ReadBatchBorrowed is ReadBatch without the copy out of a coalesced
// datagram (GRO): such a packet is left where it arrived, and msgs[i].Buf
// is set to the Reader's buffer holding it (Off and Len locate it there).
// The caller may read it, not write it, and only until its next call to
// the Reader: then the buffer is reused. A packet larger than
// msgs[i].Buf[Off:] is dropped (Oversize) as ReadBatch drops it, so that
// the caller can still open it into its own buffer. Packets read one per
// datagram land at msgs[i].Buf[Off:], as ReadBatch places them, so the
// caller sets Buf and Off before every call.
func (r *Reader) ReadBatchBorrowed(msgs []Message) (int, error) {
	return r.readBatch(msgs, true)
}

func (r *Reader) readBatch(msgs []Message, borrow bool) (int, error) {
	if len(msgs) == 0 {
		return 0, nil
	}
	if len(msgs) > BatchSize {
		msgs = msgs[:BatchSize]
	}
	for {
		var n int
		var err error
		if r.sock.gro {
			n, err = r.readGRO(msgs, borrow)
		} else {
			n, err = r.readDirect(msgs)
		}
		if n > 0 || err != nil {
			return n, err
		}
	}
}

// recv runs one recvmmsg of r.vlen slots through the poller.
func (r *Reader) recv() (int, error) {
	r.got, r.errno = 0, 0
	if err := r.sock.rc.Read(r.readFn); err != nil {
		return 0, fmt.Errorf("underlay: read %s: %w", r.sock.name, err)
	}
	if r.errno != 0 {
		return 0, fmt.Errorf("underlay: read %s: %w", r.sock.name, os.NewSyscallError("recvmmsg", r.errno))
	}
	return r.got, nil
}

func (r *Reader) readOnce(fd uintptr) bool {
	for {
		n, errno := recvmmsg(fd, r.hdrs[:r.vlen])
		switch errno {
		case 0:
			r.got = n
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false // wait for the poller
		}
		r.errno = errno
		return true
	}
}

// prepareSlot readies slot i's address and control buffers.
func (r *Reader) prepareSlot(i int) {
	oob := r.oob[i*oobSize : i*oobSize : (i+1)*oobSize]
	if r.sock.gro || r.sock.pktinfo {
		oob = oob[:oobSize]
	}
	setMsghdr(&r.hdrs[i].Hdr, &r.names[i], unix.SizeofSockaddrInet6, r.iovs[i:i+1], oob)
}

// readDirect receives straight into the callers' buffers: no copy unless a
// dropped datagram leaves a gap or a raw IPv4 header is not 20 bytes.
func (r *Reader) readDirect(msgs []Message) (int, error) {
	n := min(len(msgs), len(r.hdrs))
	raw4 := r.sock.raw && !r.sock.v6
	for i := range n {
		m := &msgs[i]
		region := m.Buf[m.Off:]
		if raw4 && m.Off >= 20 {
			// Let the usual 20-byte IPv4 header land in the headroom so
			// that the ESP packet lands at Off.
			region = m.Buf[m.Off-20:]
		}
		setIovec(&r.iovs[i], region)
		r.prepareSlot(i)
	}
	r.vlen = n
	got, err := r.recv()
	if err != nil {
		return 0, err
	}
	var d Counters
	out := 0
	for i := range got {
		h := &r.hdrs[i]
		m := &msgs[i]
		region := m.Buf[m.Off:]
		if raw4 && m.Off >= 20 {
			region = m.Buf[m.Off-20:]
		}
		if h.Hdr.Flags&unix.MSG_TRUNC != 0 {
			d.Oversize++
			continue
		}
		b := region[:h.Len]
		if raw4 {
			start := ipv4Payload(b)
			if start < 0 {
				d.HeaderErrors++
				continue
			}
			b = b[start:]
		}
		var local netip.Addr
		if r.sock.pktinfo {
			_, local = parseControl(r.oob[i*oobSize : i*oobSize+int(h.Hdr.Controllen)])
		}
		peer := getSockaddr(&r.names[i])
		if !r.accept(b, peer, local, &d) {
			continue
		}
		if r.deliver(&msgs[out], b, peer, local, &d) {
			out++
		}
	}
	r.c.ctr.add(&d)
	return out, nil
}

// readGRO hands out pending segments, or receives coalesced datagrams into
// the Reader's buffers and splits them by their segment size. With borrow
// the segments stay in the Reader's buffers (ReadBatchBorrowed).
func (r *Reader) readGRO(msgs []Message, borrow bool) (int, error) {
	if r.groNext >= r.groN {
		for i := range groSlots {
			r.prepareSlot(i)
		}
		r.vlen = groSlots
		got, err := r.recv()
		if err != nil {
			return 0, err
		}
		for i := range got {
			h := &r.hdrs[i]
			r.groGSO[i], r.groLocal[i] = parseControl(r.oob[i*oobSize : i*oobSize+int(h.Hdr.Controllen)])
		}
		r.groNext, r.groN, r.groOff = 0, got, 0
	}
	var d Counters
	out := 0
	for out < len(msgs) && r.groNext < r.groN {
		i := r.groNext
		h := &r.hdrs[i]
		total := int(h.Len)
		if h.Hdr.Flags&unix.MSG_TRUNC != 0 {
			d.Oversize++
			r.groNext, r.groOff = r.groNext+1, 0
			continue
		}
		seg := r.groGSO[i]
		if seg <= 0 || seg > total {
			seg = total
		}
		peer := getSockaddr(&r.names[i])
		local := r.groLocal[i]
		buf := r.groBufs[i][:total]
		for r.groOff < total && out < len(msgs) {
			end := min(r.groOff+seg, total)
			b := buf[r.groOff:end]
			r.groOff = end
			if !r.accept(b, peer, local, &d) {
				continue
			}
			var ok bool
			switch m := &msgs[out]; {
			case !borrow:
				ok = r.deliver(m, b, peer, local, &d)
			case len(b) > len(m.Buf)-m.Off:
				// Too large for the caller's buffer, which it opens
				// the packet into: dropped as deliver drops it.
				d.Oversize++
			default:
				ok = r.lend(m, buf, r.groOff-len(b), len(b), peer, local, &d)
			}
			if ok {
				if seg < total {
					d.RxGRO++
				}
				out++
			}
		}
		if r.groOff >= total {
			r.groNext, r.groOff = r.groNext+1, 0
		}
	}
	r.c.ctr.add(&d)
	return out, nil
}

// accept classifies a received packet: true if it is ESP to hand up; if
// not, it is counted (and passed to the IKE hook).
func (r *Reader) accept(b []byte, peer netip.AddrPort, local netip.Addr, d *Counters) bool {
	if r.sock.raw {
		if classifyRaw(b) != kindESP {
			d.HeaderErrors++
			return false
		}
		return true
	}
	switch classifyUDP(b) {
	case kindKeepalive:
		d.Keepalives++
		return false
	case kindNonESP:
		d.NonESP++
		if r.c.nonESP != nil {
			r.c.nonESP(b, peer, local)
		}
		return false
	case kindShort:
		d.HeaderErrors++
		return false
	}
	return true
}

// deliver places packet b into m at m.Buf[m.Off:], moving it if it is not
// already there.
func (r *Reader) deliver(m *Message, b []byte, peer netip.AddrPort, local netip.Addr, d *Counters) bool {
	dst := m.Buf[m.Off:]
	if len(b) > len(dst) {
		d.Oversize++
		return false
	}
	if !sameBytes(dst, b) {
		copy(dst, b) // memmove: b may overlap dst
	}
	return r.lend(m, m.Buf, m.Off, len(b), peer, local, d)
}

// lend points m at the packet buf[off:off+n] and counts it.
func (r *Reader) lend(m *Message, buf []byte, off, n int, peer netip.AddrPort, local netip.Addr, d *Counters) bool {
	m.Buf, m.Off, m.Len = buf, off, n
	m.Peer = peer
	m.Local = local
	m.Raw = r.sock.raw
	d.RxPackets++
	d.RxBytes += uint64(n)
	return true
}
