package stack

import (
	"os"
	"sync"
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	gvstack "gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/stack/gro"

	"github.com/ipsecd/ipsecd/internal/iphdr"
)

const (
	// batchSize is the most packets the queue's Read returns and its
	// Write takes at once: the TUN's batch, so the datapath's send and
	// receive batches are as large as with a TUN.
	batchSize = 128

	// queueLimit is how many packets netstack may have written and the
	// datapath not yet read; beyond it WritePackets drops (ErrNoBufferSpace)
	// as a full TUN queue would, and TCP retransmits. TCP never has that
	// many super-packets in flight (its send buffer is smaller), so it is
	// reached only by floods of datagrams.
	queueLimit = 1024

	// gsoMaxSize is the largest TCP super-packet netstack hands over:
	// the most an IP packet can hold, less the IPv6 header. TCP keeps its
	// payload below gsoMaxSize less the largest TCP header.
	gsoMaxSize = 1<<16 - 1 - header.IPv6MinimumSize
)

// endpoint is the netstack NIC's link endpoint (gvstack.LinkEndpoint) and
// the datapath's view of it (the one xfrmif.Queue of the link):
//
//   - outbound, WritePackets queues what netstack writes (taking a
//     reference) and the datapath's send worker takes it with Read, which
//     splits super-packets while copying them into the worker's buffers;
//   - inbound, the datapath's receive worker hands opened packets to Write,
//     which copies each into a View and passes it up through GRO.
//
// WritePackets may be called from any number of goroutines (netstack's);
// Read from one (the send worker); Write from any, serialised by wmu.
type endpoint struct {
	mtu atomic.Uint32

	// dispatcher is the NIC, set by Attach (nil when detached).
	dispatcher atomic.Pointer[dispatcherBox]

	// mu guards: pending, closed. WritePackets appends to pending;
	// Read swaps it for its own slice when it has used that up.
	mu      sync.Mutex
	pending []*gvstack.PacketBuffer
	closed  bool

	wake chan struct{} // a packet was queued; buffered 1
	done chan struct{} // closed by close

	// rmu guards: cur, next, seg. Read holds it while it runs (never
	// while it waits), and close takes it to release what Read holds.
	rmu  sync.Mutex
	cur  []*gvstack.PacketBuffer // taken from pending, read from next on
	next int
	seg  segmenter

	// wmu guards: gro. Taken by Write.
	wmu sync.Mutex
	gro gro.GRO

	closeOnce sync.Once

	// Counted by the endpoint; the Interface counts the rest.
	queueDrops atomic.Uint64 // WritePackets found the queue full
	sizeDrops  atomic.Uint64 // a packet or segment did not fit a buffer
	splits     atomic.Uint64 // super-packets split into several segments
}

// dispatcherBox lets an interface value live behind an atomic.Pointer.
type dispatcherBox struct{ d gvstack.NetworkDispatcher }

var _ gvstack.LinkEndpoint = (*endpoint)(nil)
var _ gvstack.GSOEndpoint = (*endpoint)(nil)
var _ gvstack.QueueingDiscipline = (*endpoint)(nil)

func newEndpoint(mtu int) *endpoint {
	e := &endpoint{
		pending: make([]*gvstack.PacketBuffer, 0, batchSize),
		cur:     make([]*gvstack.PacketBuffer, 0, batchSize),
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	e.mtu.Store(uint32(mtu))
	// GRO is always on: the ESP ICV authenticated each packet, so the
	// endpoint claims RX checksum offload, which GRO needs.
	e.gro.Init(true)
	return e
}

// MTU implements gvstack.NetworkLinkEndpoint.
func (e *endpoint) MTU() uint32 { return e.mtu.Load() }

// SetMTU implements gvstack.NetworkLinkEndpoint.
func (e *endpoint) SetMTU(mtu uint32) { e.mtu.Store(mtu) }

// MaxHeaderLength implements gvstack.NetworkLinkEndpoint: no link header.
// The ESP headers are not reserved here because packets are copied into
// the datapath's buffers, which have the headroom.
func (e *endpoint) MaxHeaderLength() uint16 { return 0 }

// LinkAddress implements gvstack.NetworkLinkEndpoint: an IP link has none.
func (e *endpoint) LinkAddress() tcpip.LinkAddress { return "" }

// SetLinkAddress implements gvstack.NetworkLinkEndpoint.
func (e *endpoint) SetLinkAddress(tcpip.LinkAddress) {}

// Capabilities implements gvstack.NetworkLinkEndpoint. Inbound packets
// come out of ESP, whose ICV covered them: their checksums need no
// second check (and GRO needs this to coalesce). Outbound checksums are
// computed by netstack, or by the segmenter for TCP super-packets.
func (e *endpoint) Capabilities() gvstack.LinkEndpointCapabilities {
	return gvstack.CapabilityRXChecksumOffload
}

// GSOMaxSize implements gvstack.GSOEndpoint.
func (e *endpoint) GSOMaxSize() uint32 { return gsoMaxSize }

// SupportedGSO implements gvstack.GSOEndpoint: TCP hands over super-packets
// with a partial checksum, which the segmenter splits and completes.
func (e *endpoint) SupportedGSO() gvstack.SupportedGSO { return gvstack.HostGSOSupported }

// Attach implements gvstack.NetworkLinkEndpoint.
func (e *endpoint) Attach(d gvstack.NetworkDispatcher) {
	if d == nil {
		e.dispatcher.Store(nil)
		return
	}
	e.dispatcher.Store(&dispatcherBox{d})
}

// IsAttached implements gvstack.NetworkLinkEndpoint.
func (e *endpoint) IsAttached() bool { return e.dispatcher.Load() != nil }

// Wait implements gvstack.NetworkLinkEndpoint: the endpoint has no
// goroutines of its own (the datapath's workers call it).
func (e *endpoint) Wait() {}

// ARPHardwareType implements gvstack.NetworkLinkEndpoint.
func (e *endpoint) ARPHardwareType() header.ARPHardwareType { return header.ARPHardwareNone }

// AddHeader implements gvstack.NetworkLinkEndpoint: no link header.
func (e *endpoint) AddHeader(*gvstack.PacketBuffer) {}

// ParseHeader implements gvstack.NetworkLinkEndpoint: no link header.
func (e *endpoint) ParseHeader(*gvstack.PacketBuffer) bool { return true }

// Close implements gvstack.NetworkLinkEndpoint (the NIC is removed).
func (e *endpoint) Close() { e.close() }

// SetOnCloseAction implements gvstack.NetworkLinkEndpoint.
func (e *endpoint) SetOnCloseAction(func()) {}

// WritePackets implements gvstack.LinkWriter. The packets are borrowed:
// each one queued gets a reference of its own, which Read drops once it
// has copied the packet out. The NIC writes through WritePacket instead;
// this is for callers that write to the endpoint directly.
func (e *endpoint) WritePackets(pkts gvstack.PacketBufferList) (int, tcpip.Error) {
	n, err := e.enqueue(pkts.AsSlice()...)
	if err == nil && n < pkts.Len() {
		err = &tcpip.ErrNoBufferSpace{}
	}
	return n, err
}

// WritePacket implements gvstack.QueueingDiscipline: the endpoint is its
// NIC's qdisc (link.go), so the NIC hands it each packet as it is. The
// NIC's default qdisc would wrap every packet in a PacketBufferList of
// one for WritePackets, an allocation per packet; the endpoint's queue
// already gives the send worker its batches. The packet is borrowed, as
// for WritePackets.
func (e *endpoint) WritePacket(pkt *gvstack.PacketBuffer) tcpip.Error {
	n, err := e.enqueue(pkt)
	if err == nil && n == 0 {
		err = &tcpip.ErrNoBufferSpace{}
	}
	return err
}

// enqueue queues pkts, each with a reference of its own, up to
// queueLimit; it counts the rest as queue drops. After close it queues
// nothing and returns ErrClosedForSend.
func (e *endpoint) enqueue(pkts ...*gvstack.PacketBuffer) (int, tcpip.Error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return 0, &tcpip.ErrClosedForSend{}
	}
	n := 0
	for _, pkt := range pkts {
		if len(e.pending) >= queueLimit {
			break
		}
		e.pending = append(e.pending, pkt.IncRef())
		n++
	}
	e.mu.Unlock()
	if n > 0 {
		select {
		case e.wake <- struct{}{}:
		default:
		}
	}
	if n < len(pkts) {
		e.queueDrops.Add(uint64(len(pkts) - n))
	}
	return n, nil
}

// Read implements xfrmif.Queue: it blocks until netstack has written at
// least one packet, then copies up to len(bufs) packets into
// bufs[i][offset:], splitting super-packets into segments. A super-packet
// that does not fit in what is left of bufs is continued by the next Read.
// After close it returns os.ErrClosed. Not safe for concurrent use.
func (e *endpoint) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	for {
		e.rmu.Lock()
		n := e.fillLocked(bufs, sizes, offset)
		e.rmu.Unlock()
		if n > 0 {
			return n, nil
		}
		select {
		case <-e.wake:
		case <-e.done:
			return 0, os.ErrClosed
		}
	}
}

// fillLocked copies what is queued into bufs and returns how many packets
// it wrote; 0 when nothing is queued (or the endpoint is closed).
func (e *endpoint) fillLocked(bufs [][]byte, sizes []int, offset int) int {
	n := 0
	for n < len(bufs) {
		if !e.seg.active() {
			pkt := e.popLocked()
			if pkt == nil {
				break
			}
			if !e.seg.start(pkt) {
				pkt.DecRef()
				e.sizeDrops.Add(1)
				continue
			}
			if e.seg.tcp && e.seg.left > e.seg.h.MSS {
				e.splits.Add(1)
			}
		}
		size, ok := e.seg.next(bufs[n][offset:])
		if !ok {
			e.sizeDrops.Add(1)
			e.seg.release()
			continue
		}
		sizes[n] = size
		n++
		if e.seg.done() {
			e.seg.release()
		}
	}
	return n
}

// popLocked returns the next queued packet, or nil. It takes pending's
// packets all at once, so WritePackets and Read meet once per batch.
func (e *endpoint) popLocked() *gvstack.PacketBuffer {
	if e.next == len(e.cur) {
		clear(e.cur)
		e.cur, e.next = e.cur[:0], 0
		e.mu.Lock()
		if e.closed {
			e.mu.Unlock()
			return nil
		}
		e.cur, e.pending = e.pending, e.cur
		e.mu.Unlock()
		if len(e.cur) == 0 {
			return nil
		}
	}
	pkt := e.cur[e.next]
	e.cur[e.next] = nil
	e.next++
	return pkt
}

// Write implements xfrmif.Queue: it delivers the inbound packets
// bufs[i][offset:] to netstack, each copied into a View of its own (the
// one copy of the inbound path) and passed through GRO, which is flushed
// once per call. The caller keeps bufs. Packets that are not IP, or come
// before Attach, are dropped.
func (e *endpoint) Write(bufs [][]byte, offset int) (int, error) {
	box := e.dispatcher.Load()
	select {
	case <-e.done:
		return 0, os.ErrClosed
	default:
	}
	if box == nil {
		return 0, nil
	}
	e.wmu.Lock()
	defer e.wmu.Unlock()
	e.gro.Dispatcher = box.d
	n := 0
	for _, b := range bufs {
		p := b[offset:]
		var proto tcpip.NetworkProtocolNumber
		switch iphdr.Version(p) {
		case 4:
			proto = header.IPv4ProtocolNumber
		case 6:
			proto = header.IPv6ProtocolNumber
		default:
			continue
		}
		v := buffer.NewViewSize(len(p))
		copy(v.AsSlice(), p)
		pkt := gvstack.NewPacketBuffer(gvstack.PacketBufferOptions{Payload: buffer.MakeWithView(v)})
		pkt.NetworkProtocolNumber = proto
		pkt.RXChecksumValidated = true
		e.gro.Enqueue(pkt)
		pkt.DecRef()
		n++
	}
	e.gro.Flush()
	e.gro.Dispatcher = nil
	return n, nil
}

// BatchSize implements xfrmif.Queue.
func (e *endpoint) BatchSize() int { return batchSize }

// close makes Read return os.ErrClosed and WritePackets refuse packets,
// and drops the references of every packet still queued. Idempotent.
func (e *endpoint) close() {
	e.closeOnce.Do(func() {
		e.mu.Lock()
		e.closed = true
		pending := e.pending
		e.pending = nil
		e.mu.Unlock()
		close(e.done)
		for _, pkt := range pending {
			pkt.DecRef()
		}
		e.rmu.Lock()
		for _, pkt := range e.cur[e.next:] {
			pkt.DecRef()
		}
		e.cur, e.next = nil, 0
		e.seg.release()
		e.rmu.Unlock()
	})
}
