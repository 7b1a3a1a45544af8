package datapath_test

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/datapath/datapathtest"
	"github.com/ipsecd/ipsecd/internal/blocktest"
	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/tun/netnstest"
	"github.com/ipsecd/ipsecd/xfrmif"
)

// TestWorkersRestartOnTUN: Workers.Stop releases the transmitting workers
// of a TUN interface, blocked in their reads, with a read deadline; and
// workers started again on the same queues (as the node restarts them
// when an interface's MTU grows) are not stopped by that deadline: a
// datagram routed into the interface afterwards is sealed, crosses the
// underlay, and leaves the peer's interface.
func TestWorkersRestartOnTUN(t *testing.T) {
	ns := netnstest.New(t, "restart")
	var ifc *xfrmif.Interface
	var conn *net.UDPConn
	err := ns.Do(func() (err error) {
		ifc, err = xfrmif.Create(xfrmif.Config{Name: "ipsec1", IfID: 1, MTU: 1400, Queues: 2,
			Addresses: []netip.Prefix{netip.MustParsePrefix("192.0.2.1/24")},
			Routes:    []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}})
		if err != nil {
			return err
		}
		conn, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IP{192, 0, 2, 1}})
		return err
	})
	if ifc != nil {
		t.Cleanup(func() { ifc.Close() })
	}
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	addrA, addrB := netip.MustParseAddrPort("203.0.113.1:4500"), netip.MustParseAddrPort("203.0.113.2:4500")
	endA, endB := datapathtest.Pipe(addrA, addrB)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := newEngine(t, endA, sadOf(t, pipeSA(t, sa.DirOut, addrA.Addr(), addrB.Addr())), ifc)
	b := newSide(t, ctx, endB, pipeSA(t, sa.DirIn, addrA.Addr(), addrB.Addr()))

	w := a.StartInterface(ctx, ifc)
	blocktest.Wait(t, "(*Interface).ReadQueue")
	stopped := make(chan struct{})
	go func() {
		w.Stop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Workers.Stop did not release the workers blocked in their TUN reads within 5 s")
	}
	a.StartInterface(ctx, ifc)
	blocktest.Wait(t, "(*Interface).ReadQueue")

	payload := []byte("after the restart")
	if _, err := conn.WriteToUDPAddrPort(payload, netip.MustParseAddrPort("198.51.100.9:7")); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(5 * time.Second)
	for {
		select {
		case got := <-b.queue.Out:
			if len(got) >= 28 && got[9] == 17 && bytes.Equal(got[28:], payload) {
				return
			}
			// Not ours: an IPv6 router solicitation of the new link.
		case <-deadline:
			t.Fatalf("the datagram did not come out of the peer within 5 s (A's interface: %+v)", ifc.Stats())
		}
	}
}
