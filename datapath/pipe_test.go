package datapath_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/datapath"
	"github.com/ipsecd/ipsecd/datapath/datapathtest"
	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/xfrmif"
)

// chanQueue is an xfrmif.Queue fed and drained by the test: Read returns
// what is sent on in, Write sends what the interface delivers on out.
type chanQueue struct {
	in, out chan []byte
	closed  chan struct{}
}

func (q *chanQueue) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	select {
	case p := <-q.in:
		sizes[0] = copy(bufs[0][offset:], p)
		return 1, nil
	case <-q.closed:
		return 0, os.ErrClosed
	}
}

func (q *chanQueue) Write(bufs [][]byte, offset int) (int, error) {
	for _, b := range bufs {
		q.out <- bytes.Clone(b[offset:])
	}
	return len(bufs), nil
}

func (q *chanQueue) BatchSize() int { return 1 }

// chanLink is an xfrmif.Link of one chanQueue.
type chanLink struct{ q *chanQueue }

func newChanLink() chanLink {
	return chanLink{&chanQueue{in: make(chan []byte, 16), out: make(chan []byte, 16), closed: make(chan struct{})}}
}

func (l chanLink) Queues() []xfrmif.Queue           { return []xfrmif.Queue{l.q} }
func (l chanLink) SetMTU(int) error                 { return nil }
func (l chanLink) AddAddress(netip.Prefix) error    { return nil }
func (l chanLink) RemoveAddress(netip.Prefix) error { return nil }
func (l chanLink) AddRoute(netip.Prefix) error      { return nil }
func (l chanLink) RemoveRoute(netip.Prefix) error   { return nil }
func (l chanLink) Close() error                     { close(l.q.closed); return nil }

// side is one engine over one end of a pipe, with one interface.
type side struct {
	engine *datapath.Engine
	link   chanLink
	ifc    *xfrmif.Interface
	sad    *sa.SAD
}

// newSide is newSideSAD with a SAD that holds s.
func newSide(t *testing.T, ctx context.Context, end *datapathtest.End, s *sa.SA) side {
	t.Helper()
	sad := sa.NewSAD(nil)
	if err := sad.Replace([]*sa.SA{s}, nil); err != nil {
		t.Fatal(err)
	}
	return newSideSAD(t, ctx, end, sad)
}

// newSideSAD runs an engine over end and sad, with one interface of
// if_id 1 over a chanLink.
func newSideSAD(t *testing.T, ctx context.Context, end *datapathtest.End, sad *sa.SAD) side {
	t.Helper()
	link := newChanLink()
	ifc, err := xfrmif.NewInterface(xfrmif.Config{Name: "ipsec1", IfID: 1}, link)
	if err != nil {
		t.Fatal(err)
	}
	reg := &xfrmif.Registry{}
	if err := reg.Add(ifc); err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	e := datapath.New(sad, reg, end, logrus.NewEntry(log))
	e.Start(ctx)
	e.StartInterface(ctx, ifc)
	t.Cleanup(func() {
		end.Close()
		reg.Close()
		e.Wait()
	})
	return side{engine: e, link: link, ifc: ifc, sad: sad}
}

// pipeSA is an ESP-in-UDP tunnel SA of if_id 1 from src to dst, SPI
// 0x1001, with the same AES-GCM key for every call.
func pipeSA(t *testing.T, dir sa.Dir, src, dst netip.Addr) *sa.SA {
	t.Helper()
	s, err := sa.New(sa.Config{Src: src, Dst: dst, SPI: 0x1001, Dir: dir, Mode: sa.ModeTunnel, IfID: 1,
		AEAD:         &sa.Algorithm{Name: sa.AlgGCM, Key: bytes.Repeat([]byte{0x5a}, 20)},
		Encap:        &sa.Encap{SrcPort: 4500, DstPort: 4500},
		ReplayWindow: 64}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// innerUDP is an IPv4 UDP packet 198.51.100.1 -> 203.0.113.1 with 100
// bytes of payload.
func innerUDP() []byte {
	inner := make([]byte, 128)
	inner[0], inner[8], inner[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(inner[2:], uint16(len(inner)))
	copy(inner[12:], []byte{198, 51, 100, 1})
	copy(inner[16:], []byte{203, 0, 113, 1})
	for i := 28; i < len(inner); i++ {
		inner[i] = byte(i)
	}
	return inner
}

// TestPipe runs the data path of two engines without a socket: a packet
// routed into A's interface is sealed, crosses the in-memory underlay,
// is opened by B and leaves B's interface as it entered A's.
func TestPipe(t *testing.T) {
	addrA, addrB := netip.MustParseAddrPort("192.0.2.1:4500"), netip.MustParseAddrPort("192.0.2.2:4500")
	endA, endB := datapathtest.Pipe(addrA, addrB)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := newSide(t, ctx, endA, pipeSA(t, sa.DirOut, addrA.Addr(), addrB.Addr()))
	b := newSide(t, ctx, endB, pipeSA(t, sa.DirIn, addrA.Addr(), addrB.Addr()))
	inner := innerUDP()
	for i := range 3 {
		a.link.q.in <- inner
		select {
		case got := <-b.link.q.out:
			if !bytes.Equal(got, inner) {
				t.Fatalf("packet %d: B delivered % x, want % x", i, got, inner)
			}
		case <-time.After(5 * time.Second):
			w, d := endA.Counts()
			t.Fatalf("packet %d: nothing delivered by B within 5 s (A wrote %d, dropped %d; B's counters: %v)", i, w, d, b.sad.Counters())
		}
	}
	if w, d := endA.Counts(); w != 3 || d != 0 {
		t.Errorf("A wrote %d ESP packets and dropped %d, want 3 and 0", w, d)
	}
}
