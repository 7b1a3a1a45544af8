package datapath

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/internal/vnet"
	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/sa/satest"
	"github.com/ipsecd/ipsecd/underlay"
	"github.com/ipsecd/ipsecd/xfrmif"
	"github.com/ipsecd/ipsecd/xfrmif/xfrmiftest"
)

// countQueue is an interface queue whose every Read returns batch copies
// of pkt (with no pkt, os.ErrClosed), and that counts what is written to
// it. It allocates nothing.
type countQueue struct {
	pkt     []byte
	batch   int
	packets int
}

func (q *countQueue) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	if q.pkt == nil {
		return 0, os.ErrClosed
	}
	for i := range q.batch {
		sizes[i] = copy(bufs[i][offset:], q.pkt)
	}
	return q.batch, nil
}

func (q *countQueue) Write(bufs [][]byte, offset int) (int, error) {
	q.packets += len(bufs)
	return len(bufs), nil
}

func (q *countQueue) BatchSize() int { return max(q.batch, 1) }

// frameQueue is a countQueue that is read a frame at a time, as a TUN
// queue is (xfrmif's ReadsFrames): every ReadFrame returns frame.
type frameQueue struct {
	countQueue
	frame []byte
}

func (q *frameQueue) ReadFrame(buf []byte) (int, error) { return copy(buf, q.frame), nil }

// pipeline is the whole data path of one engine looped back on itself:
// an interface queue that reads batches of one inner packet, ESP in UDP
// over loopback, and the interface it delivers into.
type pipeline struct {
	q        *countQueue
	ifc      *xfrmif.Interface
	counters *sa.Counters
	recv     *receiver
	batch    int
	// round reads a batch from the queue, seals and sends it, then
	// reads, opens and delivers it, through the two workers' read and
	// handle.
	round func()
}

// newPipeline builds a pipeline for batches of batch packets of size
// bytes, opened on workers goroutines, and runs a first round (for the
// sockets' and the SA's first-use state).
func newPipeline(tb testing.TB, workers, batch, size int) *pipeline {
	return newFramePipeline(tb, workers, batch, size, nil)
}

// newFramePipeline is newPipeline, but with frame its queue is read a
// frame at a time (ReadFrame) and every read returns frame, a super-packet
// of batch segments of at most size bytes.
func newFramePipeline(tb testing.TB, workers, batch, size int, frame []byte) *pipeline {
	conn, err := underlay.Open(underlay.Config{UDP: netip.MustParseAddrPort("127.0.0.1:0")}, nil)
	if err != nil {
		tb.Skipf("no underlay here: %v", err)
	}
	tb.Cleanup(func() { conn.Close() })

	key := make([]byte, 20)
	loop := netip.MustParseAddr("127.0.0.1")
	counters := new(sa.Counters)
	mk := func(dir sa.Dir) *sa.SA {
		s, err := sa.New(sa.Config{Src: loop, Dst: loop, SPI: 0x1001, Dir: dir, Mode: sa.ModeTunnel, IfID: 1,
			AEAD:  &sa.Algorithm{Name: "rfc4106(gcm(aes))", Key: key},
			Encap: &sa.Encap{SrcPort: conn.Port(), DstPort: conn.Port()}, ReplayWindow: 1024}, counters)
		if err != nil {
			tb.Fatal(err)
		}
		return s
	}
	sad := sa.NewSAD(counters)
	if err := sad.Replace([]*sa.SA{mk(sa.DirOut), mk(sa.DirIn)}, nil); err != nil {
		tb.Fatal(err)
	}
	inner := satest.IPv4UDP(netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("203.0.113.1"), size)
	q := &countQueue{pkt: inner, batch: batch}
	var link xfrmif.Link = xfrmiftest.NewLink(q)
	if frame != nil {
		fq := &frameQueue{countQueue: countQueue{batch: batch}, frame: frame}
		q, link = &fq.countQueue, xfrmiftest.NewLink(fq)
	}
	ifc, err := xfrmif.NewInterface(xfrmif.Config{Name: "ipsec1", IfID: 1, MTU: max(size, 576)}, link)
	if err != nil {
		tb.Fatal(err)
	}
	reg := &xfrmif.Registry{}
	if err := reg.Add(ifc); err != nil {
		tb.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	e := New(sad, reg, FromConn(conn), logrus.NewEntry(log))

	tx := newTransmitter(e, ifc, 0, size)
	r := conn.Readers()[0]
	recv := newReceiver(e, r)
	recv.open.start(sad, workers, &e.wg)
	tb.Cleanup(recv.open.stop)
	r.SetReadDeadline(time.Now().Add(time.Minute))

	p := &pipeline{q: q, ifc: ifc, counters: counters, recv: recv, batch: batch}
	p.round = func() {
		n, err := tx.read()
		if err != nil || n != batch {
			tb.Fatalf("interface read %d packets (%v), want %d", n, err, batch)
		}
		tx.handle(n)
		for got := 0; got < batch; {
			n, err := recv.read()
			if err != nil {
				tb.Fatal(err)
			}
			recv.handle(n)
			got += n
		}
	}
	p.round()
	return p
}

// TestSteadyStateAllocs runs the whole data path for batches of 64 packets
// (read from an interface queue, seal, ESP in UDP over loopback, receive,
// open on one or two goroutines, deliver into the interface) through the
// two workers' read and handle, and checks that, once the workers' buffers
// exist, a batch allocates nothing. Under -race it checks the path for
// races instead.
func TestSteadyStateAllocs(t *testing.T) {
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprintf("inbound-workers=%d", workers), func(t *testing.T) {
			steadyState(t, workers)
		})
	}
}

func steadyState(t *testing.T, workers int) {
	const batch, size = 64, 1400
	p := newPipeline(t, workers, batch, size)
	q, ifc, counters, recv, round := p.q, p.ifc, p.counters, p.recv, p.round
	if raceEnabled {
		// The race detector allocates: run the rounds for the races.
		for range 21 {
			round()
		}
	} else if allocs := testing.AllocsPerRun(20, round); allocs != 0 {
		t.Errorf("a batch of %d packets allocates %v times, want 0", batch, allocs)
	}
	// One round of ours, one warm-up of AllocsPerRun's, 20 measured.
	if want := 22 * batch; q.packets != want {
		t.Errorf("interface got %d packets, want %d", q.packets, want)
	}
	if st := ifc.Stats(); st.TxPackets != 22*batch || st.TxBytes != 22*batch*size || st.TxErrors != 0 || st.TxDrops != 0 {
		t.Errorf("interface tx counters %+v, want %d packets of %d bytes and no errors or drops", st, 22*batch, size)
	}
	if workers > 1 && recv.open.splits == 0 {
		t.Errorf("no batch was opened in parallel")
	}
	counters.Each(func(name string, v uint64) {
		if v != 0 {
			t.Errorf("%s = %d, want 0", name, v)
		}
	})
}

// TestSteadyStateAllocsFrames is TestSteadyStateAllocs for a queue read a
// frame at a time (a TUN): each round reads a 64 KiB TCP super-packet,
// cuts it in place and seals its segments from it (SealSegments), and
// allocates nothing.
func TestSteadyStateAllocsFrames(t *testing.T) {
	const segments, mss = 48, 1360
	frame := superFrame{gsoType: vnet.GSOTCPv4, payload: (segments-1)*mss + 100, mss: mss, flags: 0x18}.build(rand.New(rand.NewPCG(1, 2)))
	p := newFramePipeline(t, 1, segments, 1400, frame)
	if raceEnabled {
		for range 21 {
			p.round()
		}
	} else if allocs := testing.AllocsPerRun(20, p.round); allocs != 0 {
		t.Errorf("a super-packet of %d segments allocates %v times, want 0", segments, allocs)
	}
	wantBytes := 22 * (len(frame) - vnet.HeaderLen + (segments-1)*40)
	if st := p.ifc.Stats(); st.TxPackets != 22*segments || st.TxBytes != uint64(wantBytes) || st.TxErrors != 0 || st.TxDrops != 0 {
		t.Errorf("interface tx counters %+v, want %d packets of %d bytes and no errors or drops", st, 22*segments, wantBytes)
	}
	if p.q.packets != 22*segments {
		t.Errorf("interface got %d packets, want %d", p.q.packets, 22*segments)
	}
	p.counters.Each(func(name string, v uint64) {
		if v != 0 {
			t.Errorf("%s = %d, want 0", name, v)
		}
	})
}

// BenchmarkPipeline is one engine's whole data path per batch of 64
// packets: read from the interface queue, seal, send over loopback,
// receive, open, deliver.
func BenchmarkPipeline(b *testing.B) {
	for _, size := range []int{64, 1400} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			const batch = 64
			p := newPipeline(b, 1, batch, size)
			b.ReportAllocs()
			b.SetBytes(int64(batch * size))
			for b.Loop() {
				p.round()
			}
		})
	}
}

// TestReceiveGROAllocs: the receive path of coalesced datagrams (opened
// out of the socket's buffer, coalesced and written to a real TUN with one
// writev per super-packet) allocates nothing once its buffers exist.
func TestReceiveGROAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	ifc := tunInterface(t)
	s := newGROSetup(t, ifc, segments44())
	s.round(t)
	if allocs := testing.AllocsPerRun(50, func() { s.round(t) }); allocs != 0 {
		t.Errorf("a datagram of %d packets allocates %v times, want 0", len(s.inner), allocs)
	}
	if s.gro.copies != 0 {
		t.Errorf("%d reads copied the packets out of the datagram", s.gro.copies)
	}
	if st := ifc.Stats(); st.RxPackets != 52*uint64(len(s.inner)) || st.RxErrors != 0 {
		t.Errorf("interface rx %d packets, %d errors; want %d and 0", st.RxPackets, st.RxErrors, 52*len(s.inner))
	}
}
