package stack

import (
	"bytes"
	"errors"
	"os"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	gvstack "gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/ipsecd/ipsecd/sa"

	"github.com/ipsecd/ipsecd/internal/blocktest"
)

func isErr[T tcpip.Error](err tcpip.Error) bool {
	_, ok := err.(T)
	return ok
}

// readBuffers are buffers as the datapath's send worker gives them.
func readBuffers(mtu int) ([][]byte, []int) {
	bufs := make([][]byte, batchSize)
	for i := range bufs {
		bufs[i] = make([]byte, sa.Headroom+mtu+sa.Tailroom)
	}
	return bufs, make([]int, batchSize)
}

func listOf(pkts ...*gvstack.PacketBuffer) gvstack.PacketBufferList {
	var l gvstack.PacketBufferList
	for _, p := range pkts {
		l.PushBack(p)
	}
	return l
}

// TestEndpointReadSplitsAcrossBatches: two super-packets of 48 segments
// each and a small one do not fit one batch of 64; the rest comes with the
// next Read, in order, and each queued packet's reference is dropped once
// it is copied out.
func TestEndpointReadSplitsAcrossBatches(t *testing.T) {
	e := newEndpoint(1400)
	defer e.close()
	payload := bytes.Repeat([]byte{7}, 65000)
	a := superPacket{payload: payload, mss: 1360, flags: header.TCPFlagAck, gso: true}.build()
	b := superPacket{payload: payload, mss: 1360, flags: header.TCPFlagAck | header.TCPFlagPsh, gso: true}.build()
	c := superPacket{payload: payload[:10], flags: header.TCPFlagAck}.build()
	if n, err := e.WritePackets(listOf(a, b, c)); n != 3 || err != nil {
		t.Fatalf("WritePackets = %d, %v; want 3, nil", n, err)
	}
	// The list was borrowed: the caller drops its references.
	for _, p := range []*gvstack.PacketBuffer{a, b, c} {
		p.DecRef()
	}
	bufs, sizes := readBuffers(1400)
	var seqs []uint32
	for _, want := range []int{64, 33} {
		n, err := e.Read(bufs[:64], sizes[:64], sa.Headroom)
		if err != nil || n != want {
			t.Fatalf("Read = %d, %v; want %d, nil", n, err, want)
		}
		for i := range n {
			seqs = append(seqs, header.TCP(bufs[i][sa.Headroom+header.IPv4MinimumSize:]).SequenceNumber())
		}
	}
	for i := 1; i < 96; i++ {
		if i != 48 && seqs[i] != seqs[i-1]+1360 {
			t.Fatalf("segment %d: seq %#x after %#x, want +1360", i, seqs[i], seqs[i-1])
		}
	}
	if e.seg.active() || len(e.cur[e.next:]) != 0 {
		t.Fatal("the endpoint still holds a packet after reading all")
	}
}

// TestEndpointQueueLimit: beyond queueLimit packets not yet read,
// WritePackets refuses with ErrNoBufferSpace, as a full TUN queue drops.
func TestEndpointQueueLimit(t *testing.T) {
	e := newEndpoint(1400)
	defer e.close()
	pkt := superPacket{payload: []byte{1}, flags: header.TCPFlagAck}.build()
	defer pkt.DecRef()
	l := listOf(pkt)
	for i := range queueLimit {
		if _, err := e.WritePackets(l); err != nil {
			t.Fatalf("WritePackets %d: %v", i, err)
		}
	}
	if _, err := e.WritePackets(l); !isErr[*tcpip.ErrNoBufferSpace](err) {
		t.Fatalf("WritePackets over the limit: %v, want ErrNoBufferSpace", err)
	}
	if got := e.queueDrops.Load(); got != 1 {
		t.Fatalf("queue drops %d, want 1", got)
	}
}

// TestEndpointCloseReleasesReader: a blocked Read returns os.ErrClosed
// when the endpoint closes, and WritePackets refuses afterwards.
func TestEndpointCloseReleasesReader(t *testing.T) {
	e := newEndpoint(1400)
	bufs, sizes := readBuffers(1400)
	errc := make(chan error, 1)
	go func() {
		_, err := e.Read(bufs, sizes, sa.Headroom)
		errc <- err
	}()
	blocktest.Wait(t, "(*endpoint).Read")
	select {
	case err := <-errc:
		t.Fatalf("Read returned %v before close, want it blocked", err)
	default:
	}
	e.close()
	select {
	case err := <-errc:
		if !errors.Is(err, os.ErrClosed) {
			t.Fatalf("Read after close: %v, want os.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Read still blocked 10 s after close")
	}
	pkt := superPacket{payload: []byte{1}}.build()
	defer pkt.DecRef()
	if _, err := e.WritePackets(listOf(pkt)); !isErr[*tcpip.ErrClosedForSend](err) {
		t.Fatalf("WritePackets after close: %v, want ErrClosedForSend", err)
	}
}

// TestEndpointOutboundAllocs: in steady state, queueing a super-packet
// and reading it out as 48 segments allocates nothing.
func TestEndpointOutboundAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	e := newEndpoint(1400)
	defer e.close()
	pkt := superPacket{payload: make([]byte, 65000), pieces: []int{20000, 20000}, mss: 1360, flags: header.TCPFlagAck, gso: true}.build()
	defer pkt.DecRef()
	l := listOf(pkt)
	bufs, sizes := readBuffers(1400)
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := e.WritePackets(l); err != nil {
			t.Fatal(err)
		}
		if n, err := e.Read(bufs, sizes, sa.Headroom); n != 48 || err != nil {
			t.Fatalf("Read = %d, %v; want 48", n, err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per super-packet, want 0", allocs)
	}
}

// countingDispatcher counts what GRO passes up, and checks the ownership
// rule: it holds no packet after the call.
type countingDispatcher struct {
	packets, bytes int
}

func (d *countingDispatcher) DeliverNetworkPacket(_ tcpip.NetworkProtocolNumber, pkt *gvstack.PacketBuffer) {
	d.packets++
	d.bytes += pkt.Size()
}

func (d *countingDispatcher) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *gvstack.PacketBuffer) {}

// TestEndpointWriteCoalesces: Write passes the segments of one flow up as
// one packet through GRO (they are in order and MSS-sized), and delivers
// nothing before Attach.
func TestEndpointWriteCoalesces(t *testing.T) {
	e := newEndpoint(1400)
	defer e.close()
	pkt := superPacket{payload: bytes.Repeat([]byte{9}, 20*1360), mss: 1360, flags: header.TCPFlagAck, gso: true}.build()
	defer pkt.DecRef()
	segs := split(t, pkt, 1464)
	bufs := make([][]byte, len(segs))
	for i, s := range segs {
		bufs[i] = append(make([]byte, 10), s...)
	}
	if n, err := e.Write(bufs, 10); n != 0 || err != nil {
		t.Fatalf("Write before Attach = %d, %v; want 0, nil", n, err)
	}
	var d countingDispatcher
	e.Attach(&d)
	if n, err := e.Write(bufs, 10); n != len(segs) || err != nil {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(segs))
	}
	if want := 20*1360 + 40; d.packets != 1 || d.bytes != want {
		t.Fatalf("GRO passed up %d packets, %d bytes; want 1 packet of %d", d.packets, d.bytes, want)
	}
}

// TestEndpointInboundAllocs: in steady state, delivering a batch through
// Write (one View per packet, GRO) allocates nothing: the Views and
// PacketBuffers come from gVisor's pools.
func TestEndpointInboundAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	e := newEndpoint(1400)
	defer e.close()
	pkt := superPacket{payload: bytes.Repeat([]byte{9}, 40*1360), mss: 1360, flags: header.TCPFlagAck, gso: true}.build()
	defer pkt.DecRef()
	segs := split(t, pkt, 1464)
	bufs := make([][]byte, len(segs))
	for i, s := range segs {
		bufs[i] = append(make([]byte, 10), s...)
	}
	var d countingDispatcher
	e.Attach(&d)
	allocs := testing.AllocsPerRun(200, func() { e.Write(bufs, 10) })
	if allocs != 0 {
		t.Fatalf("%.1f allocations per batch of %d, want 0", allocs, len(segs))
	}
}
