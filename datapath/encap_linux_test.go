package datapath

import (
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/sa/satest"
	"github.com/ipsecd/ipsecd/tun/netnstest"
	"github.com/ipsecd/ipsecd/underlay"
	"github.com/ipsecd/ipsecd/xfrmif"
	"github.com/ipsecd/ipsecd/xfrmif/xfrmiftest"
)

// TestEncapMismatch sends ESP for an ESP-in-UDP SA as raw ESP, and ESP for
// a raw-ESP SA in UDP, through real sockets (raw ESP and UDP on the
// loopback of a namespace of the test's own) into the receive path: each
// is dropped and counted as XfrmInStateMismatch, as Linux's xfrm_input
// does, and nothing reaches the interface; the same SAs' packets in their
// own encapsulation get through.
func TestEncapMismatch(t *testing.T) {
	ns := netnstest.New(t, "encap")
	var conn *underlay.Conn
	if err := ns.Do(func() error {
		var err error
		conn, err = underlay.Open(underlay.Config{UDP: netip.MustParseAddrPort("127.0.0.1:0"), RawESP: true}, nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	loop := netip.MustParseAddr("127.0.0.1")
	udpEncap := &sa.Encap{SrcPort: conn.Port(), DstPort: conn.Port()}
	counters := new(sa.Counters)
	mk := func(dir sa.Dir, spi uint32, encap *sa.Encap) *sa.SA {
		s, err := sa.New(sa.Config{Src: loop, Dst: loop, SPI: spi, Dir: dir, Mode: sa.ModeTunnel, IfID: 1,
			AEAD:  &sa.Algorithm{Name: sa.AlgGCM, Key: append(make([]byte, 19), byte(spi))},
			Encap: encap, ReplayWindow: 64}, counters)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	outUDP, outRaw := mk(sa.DirOut, 0x2001, udpEncap), mk(sa.DirOut, 0x2002, nil)
	sad := sa.NewSAD(counters)
	if err := sad.Replace([]*sa.SA{mk(sa.DirIn, 0x2001, udpEncap), mk(sa.DirIn, 0x2002, nil)}, nil); err != nil {
		t.Fatal(err)
	}
	q := &countQueue{}
	ifc, err := xfrmif.NewInterface(xfrmif.Config{Name: "ipsec1", IfID: 1, MTU: 1400}, xfrmiftest.NewLink(q))
	if err != nil {
		t.Fatal(err)
	}
	reg := &xfrmif.Registry{}
	if err := reg.Add(ifc); err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	e := New(sad, reg, FromConn(conn), logrus.NewEntry(log))
	receivers := map[bool]*receiver{} // by Raw
	for _, r := range conn.Readers() {
		w := newReceiver(e, r)
		w.open.start(sad, 1, &e.wg)
		defer w.open.stop()
		receivers[r.Raw()] = w
	}
	if receivers[false] == nil || receivers[true] == nil {
		t.Fatalf("want a UDP and a raw ESP reader, got %d readers", len(conn.Readers()))
	}

	inner := satest.IPv4UDP(netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("203.0.113.1"), 100)

	// send seals one packet with s, sends it raw or in UDP, and reads it
	// back on the socket of that kind into the receive path.
	send := func(s *sa.SA, raw bool) {
		t.Helper()
		esp := satest.Seal(t, s, inner)
		peer := netip.AddrPortFrom(loop, conn.Port())
		if raw {
			peer = netip.AddrPortFrom(loop, 0)
		}
		m := []underlay.Message{{Buf: esp, Len: len(esp), Peer: peer, Raw: raw}}
		if err := conn.WriteBatch(m); err != nil {
			t.Fatal(err)
		}
		w := receivers[raw]
		w.r.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := w.read()
		if err != nil {
			t.Fatalf("read (raw %v): %v", raw, err)
		}
		w.handle(n)
	}
	tests := []struct {
		name         string
		s            *sa.SA
		raw          bool
		wantMismatch uint64
		wantIface    int
	}{
		{"UDP SA, raw ESP", outUDP, true, 1, 0},
		{"raw SA, ESP in UDP", outRaw, false, 1, 0},
		{"UDP SA, ESP in UDP", outUDP, false, 0, 1},
		{"raw SA, raw ESP", outRaw, true, 0, 1},
	}
	for _, tt := range tests {
		before, delivered := counters.Get(sa.XfrmInStateMismatch), q.packets
		send(tt.s, tt.raw)
		if got := counters.Get(sa.XfrmInStateMismatch) - before; got != tt.wantMismatch {
			t.Errorf("%s: XfrmInStateMismatch +%d, want +%d", tt.name, got, tt.wantMismatch)
		}
		if got := q.packets - delivered; got != tt.wantIface {
			t.Errorf("%s: %d packets reached the interface, want %d", tt.name, got, tt.wantIface)
		}
	}
	counters.Each(func(name string, v uint64) {
		if v != 0 && name != "XfrmInStateMismatch" {
			t.Errorf("%s = %d, want 0", name, v)
		}
	})
}
