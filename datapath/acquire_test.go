package datapath_test

import (
	"bytes"
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/datapath/datapathtest"
	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/sa/satest"
)

// TestTrapAcquire is the data-path half of an on-demand tunnel (swanctl's
// start_action = trap) over the in-memory underlay: with the child's out
// policy installed and no SA, packets routed into the interface are
// dropped (XfrmOutNoStates, the interface's tx drops), nothing reaches
// the wire, and the first of them raises one Acquire for the policy.
// Once the child's SAs are installed, as IKE will after the Acquire, the
// next packet crosses.
func TestTrapAcquire(t *testing.T) {
	addrA, addrB := netip.MustParseAddrPort("192.0.2.1:4500"), netip.MustParseAddrPort("192.0.2.2:4500")
	endA, endB := datapathtest.Pipe(addrA, addrB)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := newSide(t, ctx, endB, pipeSA(t, sa.DirIn, addrA.Addr(), addrB.Addr()))

	// A: the trap policy, no SA.
	sad := sa.NewSAD(nil)
	trap := sa.Policy{Dir: sa.DirOut, IfID: 1, Action: sa.ActionAllow, Selector: sa.Selector{
		Src: netip.MustParsePrefix("198.51.100.0/24"), Dst: netip.MustParsePrefix("203.0.113.0/24")}}
	if err := sad.AddPolicy(trap); err != nil {
		t.Fatal(err)
	}
	acquires := make(chan sa.Acquire, 16)
	sad.SetAcquireHandler(func(a sa.Acquire) {
		select {
		case acquires <- a:
		default:
		}
	}, time.Hour)
	a := newSideSAD(t, ctx, endA, sad)
	queue, ifc := a.queue, a.ifc

	inner := satest.IPv4UDP(netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("203.0.113.1"), 128)
	const n = 50
	for range n {
		queue.In <- inner
	}
	// The worker reads the packets one by one; wait until it counted
	// them all.
	deadline := time.Now().Add(5 * time.Second)
	for sad.Counters().Get(sa.XfrmOutNoStates) < n || ifc.Stats().TxDrops < n {
		if time.Now().After(deadline) {
			t.Fatalf("after 5 s: XfrmOutNoStates = %d, interface tx drops = %d; want %d each",
				sad.Counters().Get(sa.XfrmOutNoStates), ifc.Stats().TxDrops, n)
		}
		time.Sleep(time.Millisecond)
	}
	if w, d := endA.Counts(); w != 0 || d != 0 {
		t.Errorf("A wrote %d ESP packets (%d dropped) without an SA, want none", w, d)
	}
	want := sa.Acquire{Policy: trap, Src: netip.MustParseAddr("198.51.100.1"), Dst: netip.MustParseAddr("203.0.113.1")}
	select {
	case a := <-acquires:
		if a != want {
			t.Fatalf("Acquire %+v, want %+v", a, want)
		}
	default:
		t.Fatal("no Acquire for the trap policy")
	}
	if len(acquires) != 0 {
		t.Fatalf("%d more Acquires for %d packets within the interval, want none", len(acquires), n)
	}

	// IKE has negotiated the child: its SA goes in, and traffic flows.
	if err := sad.Add(pipeSA(t, sa.DirOut, addrA.Addr(), addrB.Addr())); err != nil {
		t.Fatal(err)
	}
	queue.In <- inner
	select {
	case got := <-b.queue.Out:
		if !bytes.Equal(got, inner) {
			t.Fatalf("B delivered % x, want % x", got, inner)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("nothing crossed within 5 s once the SA was installed")
	}
}
