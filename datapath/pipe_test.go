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
	sad    *sa.SAD
}

func newSide(t *testing.T, ctx context.Context, end *datapathtest.End, s *sa.SA) side {
	t.Helper()
	sad := sa.NewSAD(nil)
	if err := sad.Replace([]*sa.SA{s}, nil); err != nil {
		t.Fatal(err)
	}
	link, queue := xfrmiftest.NewChanLink()
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
	return side{engine: e, queue: queue, sad: sad}
}

// TestPipe runs the data path of two engines without a socket: a packet
// routed into A's interface is sealed, crosses the in-memory underlay,
// is opened by B and leaves B's interface as it entered A's.
func TestPipe(t *testing.T) {
	addrA, addrB := netip.MustParseAddrPort("192.0.2.1:4500"), netip.MustParseAddrPort("192.0.2.2:4500")
	endA, endB := datapathtest.Pipe(addrA, addrB)
	key := bytes.Repeat([]byte{0x5a}, 20)
	mk := func(dir sa.Dir, src, dst netip.Addr) *sa.SA {
		s, err := sa.New(sa.Config{Src: src, Dst: dst, SPI: 0x1001, Dir: dir, Mode: sa.ModeTunnel, IfID: 1,
			AEAD:         &sa.Algorithm{Name: sa.AlgGCM, Key: key},
			Encap:        &sa.Encap{SrcPort: 4500, DstPort: 4500},
			ReplayWindow: 64}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := newSide(t, ctx, endA, mk(sa.DirOut, addrA.Addr(), addrB.Addr()))
	b := newSide(t, ctx, endB, mk(sa.DirIn, addrA.Addr(), addrB.Addr()))

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
