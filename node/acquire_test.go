package node

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/underlay"
)

// TestSetAcquireHandler: the handler SetAcquireHandler sets receives the
// acquire of an out policy the node holds with no SA (the data path's
// LookupOut raises it), and the packet is counted as XfrmOutNoStates;
// after SetAcquireHandler(nil) no acquire is raised, and a handler set
// later (IKE started by a reload) receives them again.
func TestSetAcquireHandler(t *testing.T) {
	var got []sa.Acquire
	n := testNodeWith(t, Config{EphemeralKeys: true})
	n.SetAcquireHandler(func(a sa.Acquire) { got = append(got, a) })
	trap := sa.Policy{Dir: sa.DirOut, IfID: 1, Action: sa.ActionAllow, Selector: sa.Selector{
		Src: netip.MustParsePrefix("10.10.0.0/24"), Dst: netip.MustParsePrefix("10.20.0.0/24")}}
	if err := n.AddPolicy(Owner("ike"), trap); err != nil {
		t.Fatal(err)
	}
	pkt := make([]byte, 20)
	pkt[0] = 0x45
	copy(pkt[12:], []byte{10, 10, 0, 1})
	copy(pkt[16:], []byte{10, 20, 0, 9})
	lookup := func(times int) {
		t.Helper()
		for range times {
			if s, c := n.SAD().LookupOut(1, pkt); s != nil || c != sa.XfrmOutNoStates {
				t.Fatalf("LookupOut = %v, %v", s, c)
			}
		}
	}
	lookup(3)
	if len(got) != 1 || got[0].Policy != trap || got[0].Dst != netip.MustParseAddr("10.20.0.9") {
		t.Fatalf("acquires %+v, want one for %+v", got, trap)
	}
	if c := n.Counters().Get(sa.XfrmOutNoStates); c != 3 {
		t.Errorf("XfrmOutNoStates = %d, want 3", c)
	}
	n.SetAcquireHandler(nil)
	lookup(1)
	if len(got) != 1 {
		t.Fatalf("%d acquires after SetAcquireHandler(nil), want still 1", len(got))
	}
	n.SetAcquireHandler(func(a sa.Acquire) { got = append(got, a) })
	lookup(1) // a new handler starts the policy's interval afresh
	if len(got) != 2 {
		t.Fatalf("%d acquires after a new handler, want 2", len(got))
	}
}

// TestSetNonESPHandler: IKE on the ESP-in-UDP port (the non-ESP marker)
// goes to the handler SetNonESPHandler sets, also one set after Start
// (the daemon starts IKE once the node runs, or at a reload), without
// the marker; with none set it is counted and dropped.
func TestSetNonESPHandler(t *testing.T) {
	n, err := New(Config{EphemeralKeys: true, Underlay: underlay.Config{UDP: netip.MustParseAddrPort("127.0.0.1:0")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	to := net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), n.Underlay().Port()))
	c, err := net.DialUDP("udp", nil, to)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	send := func(msg string) {
		t.Helper()
		if _, err := c.Write(append([]byte{0, 0, 0, 0}, msg...)); err != nil {
			t.Fatal(err)
		}
	}
	waitNonESP := func(want uint64) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); n.Underlay().Counters().NonESP < want; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("underlay counted %d non-ESP datagrams, want %d", n.Underlay().Counters().NonESP, want)
			}
		}
	}
	send("before") // no handler: counted, dropped
	waitNonESP(1)

	got := make(chan string, 4)
	n.SetNonESPHandler(func(b []byte, peer netip.AddrPort, local netip.Addr) {
		if peer.Addr() != netip.MustParseAddr("127.0.0.1") {
			t.Errorf("peer %v, want 127.0.0.1", peer)
		}
		got <- string(b)
	})
	send("ike")
	select {
	case m := <-got:
		if want := "\x00\x00\x00\x00ike"; m != want {
			t.Fatalf("handler got %q, want %q", m, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the handler set after Start got nothing")
	}
	n.SetNonESPHandler(nil)
	send("after")
	waitNonESP(3)
	select {
	case m := <-got:
		t.Fatalf("handler got %q after SetNonESPHandler(nil)", m)
	default:
	}
}
