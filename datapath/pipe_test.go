package datapath_test

import (
	"bytes"
	"context"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/datapath"
	"github.com/ipsecd/ipsecd/datapath/datapathtest"
	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/sa/satest"
	"github.com/ipsecd/ipsecd/xfrmif"
	"github.com/ipsecd/ipsecd/xfrmif/xfrmiftest"
)

// side is one engine over one end of a pipe, with one interface.
type side struct {
	engine *datapath.Engine
	queue  *xfrmiftest.ChanQueue
	ifc    *xfrmif.Interface
	sad    *sa.SAD
}

// newSide returns a running engine over end with SA s and one interface
// (if_id 1) of a ChanQueue.
func newSide(t *testing.T, ctx context.Context, end *datapathtest.End, s *sa.SA) side {
	t.Helper()
	return newSideSAD(t, ctx, end, sadOf(t, s))
}

// newSideSAD is newSide over a SAD of the test's making.
func newSideSAD(t *testing.T, ctx context.Context, end *datapathtest.End, sad *sa.SAD) side {
	t.Helper()
	link, queue := xfrmiftest.NewChanLink()
	ifc, err := xfrmif.NewInterface(xfrmif.Config{Name: "ipsec1", IfID: 1}, link)
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, end, sad, ifc)
	e.Start(ctx)
	e.StartInterface(ctx, ifc)
	return side{engine: e, queue: queue, ifc: ifc, sad: sad}
}

// sadOf returns a SAD that holds s.
func sadOf(t *testing.T, s *sa.SA) *sa.SAD {
	t.Helper()
	sad := sa.NewSAD(nil)
	if err := sad.Replace([]*sa.SA{s}, nil); err != nil {
		t.Fatal(err)
	}
	return sad
}

// newEngine returns an engine, not yet started, over end with sad and
// the interface ifc; the test's end closes end and ifc and waits for the
// engine.
func newEngine(t *testing.T, end *datapathtest.End, sad *sa.SAD, ifc *xfrmif.Interface) *datapath.Engine {
	t.Helper()
	reg := &xfrmif.Registry{}
	if err := reg.Add(ifc); err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	e := datapath.New(sad, reg, end, logrus.NewEntry(log))
	t.Cleanup(func() {
		end.Close()
		reg.Close()
		e.Wait()
	})
	return e
}

// pipeSA returns the SA of the pipe tests: AES-GCM, tunnel mode, ESP in
// UDP on port 4500, SPI 0x1001, if_id 1, from src to dst.
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

	inner := satest.IPv4UDP(netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("203.0.113.1"), 128)
	for i := range 3 {
		a.queue.In <- inner
		select {
		case got := <-b.queue.Out:
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
