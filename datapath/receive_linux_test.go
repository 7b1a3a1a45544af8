package datapath

import (
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/internal/gro/grotest"
	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/sa/satest"
	"github.com/ipsecd/ipsecd/tun/netnstest"
	"github.com/ipsecd/ipsecd/underlay"
	"github.com/ipsecd/ipsecd/xfrmif"
	"github.com/ipsecd/ipsecd/xfrmif/xfrmiftest"
)

// groReceiver is a Receiver whose every read returns the ESP packets of
// one coalesced UDP datagram (UDP GRO), back to back in one buffer as the
// underlay receives them: copied into the caller's buffers by ReadBatch,
// lent by ReadBatchBorrowed, as underlay.Reader does.
type groReceiver struct {
	datagram []byte
	lens     []int
	reads    int
	copies   int // reads through ReadBatch
}

func (r *groReceiver) ReadBatch(msgs []underlay.Message) (int, error) {
	r.reads++
	r.copies++
	off := 0
	for i, n := range r.lens {
		m := &msgs[i]
		m.Len = copy(m.Buf[m.Off:], r.datagram[off:off+n])
		m.Raw = false
		off += n
	}
	return len(r.lens), nil
}

func (r *groReceiver) ReadBatchBorrowed(msgs []underlay.Message) (int, error) {
	r.reads++
	off := 0
	for i, n := range r.lens {
		msgs[i] = underlay.Message{Buf: r.datagram, Off: off, Len: n}
		off += n
	}
	return len(r.lens), nil
}

func (r *groReceiver) BatchSize() int                  { return underlay.BatchSize }
func (r *groReceiver) SetReadDeadline(time.Time) error { return nil }
func (r *groReceiver) String() string                  { return "gro" }

// groSetup is a receiver of ESP segments of one TCP flow sealed with
// AES-GCM-128, one GRO datagram per read, delivering into an interface.
type groSetup struct {
	sad   *sa.SAD
	recv  *receiver
	gro   *groReceiver
	ifc   *xfrmif.Interface
	inner [][]byte // the cleartext segments, in order
}

// newGROSetup seals inner (the segments of one datagram) and builds the
// receiver. The inbound SA has no replay window, so that the same
// datagram can be read again and again.
func newGROSetup(tb testing.TB, ifc *xfrmif.Interface, inner [][]byte) *groSetup {
	key := make([]byte, 20)
	a, b := netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("198.51.100.2")
	counters := new(sa.Counters)
	mk := func(dir sa.Dir) *sa.SA {
		s, err := sa.New(sa.Config{Src: a, Dst: b, SPI: 0x1001, Dir: dir, Mode: sa.ModeTunnel, IfID: ifc.IfID(),
			AEAD:  &sa.Algorithm{Name: sa.AlgGCM, Key: key},
			Encap: &sa.Encap{SrcPort: 4500, DstPort: 4500}}, counters)
		if err != nil {
			tb.Fatal(err)
		}
		return s
	}
	out, in := mk(sa.DirOut), mk(sa.DirIn)
	sad := sa.NewSAD(counters)
	if err := sad.Replace([]*sa.SA{in}, nil); err != nil {
		tb.Fatal(err)
	}
	g := &groReceiver{}
	for _, p := range inner {
		esp := satest.Seal(tb, out, p)
		g.datagram = append(g.datagram, esp...)
		g.lens = append(g.lens, len(esp))
	}
	if len(g.datagram) > 1<<16 {
		tb.Fatalf("datagram of %d bytes: more than UDP GRO makes", len(g.datagram))
	}
	reg := &xfrmif.Registry{}
	if err := reg.Add(ifc); err != nil {
		tb.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	e := New(sad, reg, nil, logrus.NewEntry(log))
	return &groSetup{sad: sad, recv: newReceiver(e, g), gro: g, ifc: ifc, inner: inner}
}

// round reads one datagram and handles it.
func (s *groSetup) round(tb testing.TB) {
	n, err := s.recv.read()
	if err != nil || n != len(s.gro.lens) {
		tb.Fatalf("read %d packets (%v), want %d", n, err, len(s.gro.lens))
	}
	s.recv.handle(n)
}

// tunInterface makes an interface over a real TUN device in a fresh
// namespace, up, with an address whose prefix does not hold the test
// packets' destination: the kernel takes them in and drops them (no
// forwarding), as cheaply as it can.
func tunInterface(tb testing.TB) *xfrmif.Interface {
	ns := netnstest.New(tb, "dprx")
	var ifc *xfrmif.Interface
	err := ns.Do(func() (err error) {
		ifc, err = xfrmif.Create(xfrmif.Config{Name: "ipsec1", IfID: 1, MTU: 1500,
			Addresses: []netip.Prefix{netip.MustParsePrefix("10.9.0.1/24")}})
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ifc.Close() })
	return ifc
}

// segments44 is the cleartext of one full GRO datagram: 44 segments of a
// TCP flow with timestamps, 1448-byte packets (1396 bytes of payload),
// 1484-byte ESP packets with AES-GCM, 65,296 bytes in all.
func segments44() [][]byte {
	sizes := make([]int, 44)
	for i := range sizes {
		sizes[i] = 1396
	}
	return satest.TCPSegments(satest.TCPFlow{Src: netip.MustParseAddrPort("192.0.2.1:40000"),
		Dst: netip.MustParseAddrPort("203.0.113.1:5201"), Seq: 1, Timestamps: true}, sizes, 0)
}

// BenchmarkReceiveGRO is the receive path for one UDP GRO datagram of 44
// ESP packets of one TCP flow (AES-GCM-128): out of the receive buffer,
// open, deliver into a real TUN device. Needs root.
func BenchmarkReceiveGRO(b *testing.B) {
	ifc := tunInterface(b)
	s := newGROSetup(b, ifc, segments44())
	s.round(b)
	b.ReportAllocs()
	b.SetBytes(int64(len(s.gro.datagram)))
	cpu0 := cpuTime()
	for b.Loop() {
		s.round(b)
	}
	// On a shared machine the wall time per batch is noisy; the CPU time
	// the process spent (user and system, the kernel's TUN work
	// included) is what the path costs.
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/batch")
	if st := ifc.Stats(); st.RxErrors != 0 || st.RxDrops != 0 {
		b.Errorf("interface rx errors %d, drops %d", st.RxErrors, st.RxDrops)
	}
}

// cpuTime is the user and system CPU time of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// captureQueue is an interface queue that keeps copies of what is written
// to it, as a plain queue (a netstack link): no virtio-net header.
type captureQueue struct{ got [][]byte }

func (q *captureQueue) Read([][]byte, []int, int) (int, error) { return 0, os.ErrClosed }
func (q *captureQueue) BatchSize() int                         { return 1 }
func (q *captureQueue) Write(bufs [][]byte, offset int) (int, error) {
	for _, b := range bufs {
		q.got = append(q.got, bytes.Clone(b[offset:]))
	}
	return len(bufs), nil
}

// plainInterface is an interface over one captureQueue.
func plainInterface(tb testing.TB) (*xfrmif.Interface, *captureQueue) {
	q := &captureQueue{}
	ifc, err := xfrmif.NewInterface(xfrmif.Config{Name: "ipsec1", IfID: 1, MTU: 1500}, xfrmiftest.NewLink(q))
	if err != nil {
		tb.Fatal(err)
	}
	return ifc, q
}

// TestReceiveBorrowed: the receiver opens the packets of a coalesced
// datagram out of the socket's buffer (ReadBatchBorrowed), without a copy
// into its own first and without writing into the socket's, and delivers
// them as they were sealed.
func TestReceiveBorrowed(t *testing.T) {
	ifc, q := plainInterface(t)
	s := newGROSetup(t, ifc, segments44())
	datagram := bytes.Clone(s.gro.datagram)
	for range 3 {
		s.round(t)
	}
	if s.gro.copies != 0 {
		t.Errorf("%d of %d reads copied the packets out of the datagram", s.gro.copies, s.gro.reads)
	}
	if !bytes.Equal(s.gro.datagram, datagram) {
		t.Errorf("the socket's buffer was written")
	}
	if len(q.got) != 3*len(s.inner) {
		t.Fatalf("interface got %d packets, want %d", len(q.got), 3*len(s.inner))
	}
	for i, p := range q.got {
		if want := s.inner[i%len(s.inner)]; !bytes.Equal(p, want) {
			t.Fatalf("packet %d:\n got %x\nwant %x", i, p, want)
		}
	}
	if st := ifc.Stats(); st.RxPackets != uint64(len(q.got)) {
		t.Errorf("rx packets %d, want %d", st.RxPackets, len(q.got))
	}
}

// gatherQueue is an interface queue that takes gathered writes (as a TUN
// queue does) and keeps what the kernel would make of each.
type gatherQueue struct {
	captureQueue
	frames int
	err    error
}

func (q *gatherQueue) WriteGather(parts [][]byte) error {
	q.frames++
	segs, err := grotest.Resegment(parts)
	if err != nil && q.err == nil {
		q.err = err
	}
	q.got = append(q.got, segs...)
	return nil
}

// TestReceiveCoalesces: a datagram of two interleaved TCP flows, one with
// two segments swapped and one whose ICV fails, a UDP packet and IPv6,
// opened on one or two goroutines, reaches the kernel as super-packets
// that it resegments into exactly the packets that were sealed (less the
// forged one), each flow in its order.
func TestReceiveCoalesces(t *testing.T) {
	mk := func(src string, n int, v6 bool) [][]byte {
		sizes := make([]int, n)
		for i := range sizes {
			sizes[i] = 1300
		}
		f := satest.TCPFlow{Src: netip.MustParseAddrPort(src), Dst: netip.MustParseAddrPort("203.0.113.1:5201"), Seq: 9, Timestamps: true}
		if v6 {
			f.Dst = netip.MustParseAddrPort("[2001:db8:2::1]:5201")
		}
		return satest.TCPSegments(f, sizes, 0x18)
	}
	a, b, c := mk("192.0.2.1:40000", 20, false), mk("192.0.2.2:40000", 10, false), mk("[2001:db8:1::1]:40000", 8, true)
	udp := satest.IPv4UDP(netip.MustParseAddr("192.0.2.3"), netip.MustParseAddr("203.0.113.1"), 500)
	var inner [][]byte
	for i := range 20 {
		inner = append(inner, a[i])
		if i < len(b) {
			inner = append(inner, b[i])
		}
		if i < len(c) {
			inner = append(inner, c[i])
		}
		if i == 5 {
			inner = append(inner, udp)
		}
	}
	// Swap two of a's segments, and forge a third.
	index := func(p []byte) int { return slices.IndexFunc(inner, func(q []byte) bool { return bytes.Equal(p, q) }) }
	ia, ib := index(a[3]), index(a[4])
	inner[ia], inner[ib] = inner[ib], inner[ia]
	forged := index(a[12])
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprintf("openers=%d", workers), func(t *testing.T) {
			q := &gatherQueue{}
			ifc, err := xfrmif.NewInterface(xfrmif.Config{Name: "ipsec1", IfID: 1, MTU: 1500}, xfrmiftest.NewLink(q))
			if err != nil {
				t.Fatal(err)
			}
			s := newGROSetup(t, ifc, inner)
			var wg sync.WaitGroup
			s.recv.open.start(s.sad, workers, &wg)
			defer func() { s.recv.open.stop(); wg.Wait() }()
			end := 0
			for _, n := range s.gro.lens[:forged+1] {
				end += n
			}
			s.gro.datagram[end-1] ^= 1 // the forged packet's ICV
			s.round(t)
			if q.err != nil {
				t.Fatal(q.err)
			}
			want := slices.Delete(slices.Clone(inner), forged, forged+1)
			if !grotest.SameFlowsInOrder(q.got, want) {
				t.Fatalf("the kernel gets %d packets, not the %d sealed less the forged one in each flow's order", len(q.got), len(want))
			}
			// a: 0-2 | 4 | 3 (swapped), 5-11 | 13-19 (12 forged);
			// b and c whole. (The UDP packet goes through Write.)
			if q.frames != 7 {
				t.Errorf("%d gathered writes, want 7", q.frames)
			}
			if workers > 1 && s.recv.open.splits == 0 {
				t.Errorf("the batch was not opened in parallel")
			}
			if st := ifc.Stats(); st.RxPackets != uint64(len(want)) {
				t.Errorf("rx packets %d, want %d", st.RxPackets, len(want))
			}
		})
	}
}
