package ikenode

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/internal/iphdr"
	"github.com/ipsecd/ipsecd/sa"
)

// TestTwoHalvesTS: A proposes its local_ts as the two halves of the /24
// that B allows (the review's case). Both sides install SAs whose
// selectors are exactly the negotiated sets, two halves and the peer's
// /24, in either direction; an inner packet from a third address, sealed
// by a peer that ignores its own selectors, is dropped by B's inbound SA
// as XfrmInStateMismatch, and one from either half comes out.
func TestTwoHalvesTS(t *testing.T) {
	ya := fmt.Sprintf(sideYAML, "127.0.0.1", "127.0.0.2", "a.test", "b.test", "10.1.0", "10.2.0", "start", "4h", "0s", "clear", "1h")
	ya = strings.Replace(ya, "local_ts: [10.1.0.0/24]", "local_ts: [10.1.0.0/25, 10.1.0.128/25]", 1)
	cfgA, err := config.Parse("a.yaml", []byte(ya))
	if err != nil {
		t.Fatal(err)
	}
	cfgA.IKE.Port = 0
	n := newTestNet()
	b := startEndpoint(t, n, parseSide(t, "127.0.0.2", "127.0.0.1", "b.test", "a.test", "10.2.0", "10.1.0", sideOpts{}), "127.0.0.2", 0, 0x2000)
	a := startEndpoint(t, n, cfgA, "127.0.0.1", b.m.Port(), 0x1000)
	a.net.waitFor(t, "the child", func() bool { return matched(a.node, b.node, 1) })

	halves, peer := "10.1.0.0/25,10.1.0.128/25", "10.2.0.0/24"
	ain, aout := a.node.snapshot()
	bin, bout := b.node.snapshot()
	for _, side := range []struct {
		name string
		cfgs map[uint32]sa.Config
		want string
	}{
		{"A's outbound", aout, "src " + halves + " dst " + peer},
		{"A's inbound", ain, "src " + peer + " dst " + halves},
		{"B's outbound", bout, "src " + peer + " dst " + halves},
		{"B's inbound", bin, "src " + halves + " dst " + peer},
	} {
		for _, c := range side.cfgs {
			if got := c.Selector.String(); got != side.want {
				t.Errorf("%s SA's selector is %q, want %q", side.name, got, side.want)
			}
		}
	}

	// A peer that seals whatever it likes under A's outbound keys: the
	// inbound SA B installed decides.
	var inB, outA sa.Config
	for _, c := range bin {
		inB = c
	}
	outA = aout[inB.SPI]
	outA.Selector = sa.Selector{}
	sealer, err := sa.New(outA, nil)
	if err != nil {
		t.Fatal(err)
	}
	opener, err := sa.New(inB, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		src  string
		want sa.Counter
	}{
		{"10.1.0.7", sa.CounterNone},
		{"10.1.0.200", sa.CounterNone},
		{"10.9.9.9", sa.XfrmInStateMismatch}, // a third address
		{"10.2.0.9", sa.XfrmInStateMismatch}, // B's own LAN
		{"10.1.1.1", sa.XfrmInStateMismatch}, // next to the /24
	} {
		pkt := udp4(tt.src, "10.2.0.1")
		buf := make([]byte, sa.Headroom+len(pkt)+sa.Tailroom)
		copy(buf[sa.Headroom:], pkt)
		ps := []sa.Packet{{Buf: buf, Off: sa.Headroom, Len: len(pkt)}}
		sealer.SealBatch(ps)
		if ps[0].Drop != sa.CounterNone {
			t.Fatalf("seal from %s: %v", tt.src, ps[0].Drop)
		}
		ps[0].UDP = inB.Encap != nil
		opener.OpenBatch(ps)
		if ps[0].Drop != tt.want {
			t.Errorf("B's inbound SA, a packet from %s: %v, want %v", tt.src, ps[0].Drop, tt.want)
		}
	}
}

// udp4 is a small IPv4 UDP packet from src to dst, ports 1000 to 2000.
func udp4(src, dst string) []byte {
	p := make([]byte, 28+4)
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	p[8], p[9] = 64, 17
	copy(p[12:], netip.MustParseAddr(src).AsSlice())
	copy(p[16:], netip.MustParseAddr(dst).AsSlice())
	iphdr.IPv4(p).UpdateChecksum()
	binary.BigEndian.PutUint16(p[20:], 1000)
	binary.BigEndian.PutUint16(p[22:], 2000)
	binary.BigEndian.PutUint16(p[24:], 8+4)
	return p
}

// TestSelectorsOf: negotiated traffic selectors become exactly the SAD's
// selectors: a prefix pair when each side is one prefix of any protocol
// and port, otherwise every range, protocol and port of both sides; the
// inbound selector is the outbound one reversed; what the SAD cannot hold
// exactly is an error, never a wider selector.
func TestSelectorsOf(t *testing.T) {
	sel := func(start, end string) message.Selector {
		return message.Selector{EndPort: 65535, Start: netip.MustParseAddr(start), End: netip.MustParseAddr(end)}
	}
	tcp80 := func(s message.Selector) message.Selector { s.Proto, s.StartPort, s.EndPort = 6, 80, 80; return s }
	ls := func(s ...message.Selector) []message.Selector { return s }
	for _, tt := range []struct {
		name          string
		local, remote []message.Selector
		out           string // "" for an error
		prefixes      bool   // out is a prefix pair (no TSSet)
	}{
		{"prefixes", ls(sel("10.1.0.0", "10.1.0.255")), ls(sel("10.2.0.0", "10.2.0.255")), "src 10.1.0.0/24 dst 10.2.0.0/24", true},
		{"all v4", ls(sel("0.0.0.0", "255.255.255.255")), ls(sel("192.0.2.7", "192.0.2.7")), "src 0.0.0.0/0 dst 192.0.2.7/32", true},
		{"v6", ls(sel("2001:db8::", "2001:db8::ffff:ffff:ffff:ffff")), ls(sel("::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")), "src 2001:db8::/64 dst ::/0", true},
		{"two halves", ls(sel("10.1.0.0", "10.1.0.127"), sel("10.1.0.128", "10.1.0.255")), ls(sel("10.2.0.0", "10.2.0.255")),
			"src 10.1.0.0/25,10.1.0.128/25 dst 10.2.0.0/24", false},
		{"range", ls(sel("10.1.0.0", "10.1.0.254")), ls(sel("10.2.0.0", "10.2.0.255")), "src 10.1.0.0-10.1.0.254 dst 10.2.0.0/24", false},
		{"range across prefixes", ls(sel("10.1.1.0", "10.1.2.255")), ls(sel("10.2.0.0", "10.2.0.255")), "src 10.1.1.0-10.1.2.255 dst 10.2.0.0/24", false},
		{"protocol and port", ls(sel("10.1.0.0", "10.1.0.255")), ls(tcp80(sel("10.2.0.0", "10.2.0.255"))), "src 10.1.0.0/24 dst 10.2.0.0/24[tcp/80]", false},
		{"v4 and v6", ls(sel("10.1.0.0", "10.1.0.255"), sel("2001:db8:1::", "2001:db8:1::ffff")), ls(sel("10.2.0.0", "10.2.0.255")),
			"src 10.1.0.0/24,2001:db8:1::/112 dst 10.2.0.0/24", false},
		{"families apart", ls(sel("10.1.0.0", "10.1.0.255")), ls(sel("2001:db8:2::", "2001:db8:2::ffff")), "src 10.1.0.0/24 dst 2001:db8:2::/112", false},
		{"reversed range", ls(sel("10.1.0.255", "10.1.0.0")), ls(sel("10.2.0.0", "10.2.0.255")), "", false},
		{"opaque ports", ls(message.Selector{StartPort: 65535, EndPort: 0, Start: netip.MustParseAddr("10.1.0.0"), End: netip.MustParseAddr("10.1.0.255")}),
			ls(sel("10.2.0.0", "10.2.0.255")), "", false},
		{"none", nil, ls(sel("10.2.0.0", "10.2.0.255")), "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in, out, err := selectorsOf(tt.local, tt.remote)
			if tt.out == "" {
				if err == nil {
					t.Fatalf("got %v, want an error", out)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != tt.out {
				t.Errorf("outbound %q, want %q", got, tt.out)
			}
			if (out.TS == nil) != tt.prefixes {
				t.Errorf("outbound %q: a prefix pair %v, want %v", out, out.TS == nil, tt.prefixes)
			}
			src, dst, _ := strings.Cut(strings.TrimPrefix(tt.out, "src "), " dst ")
			if got, want := in.String(), "src "+dst+" dst "+src; got != want {
				t.Errorf("inbound %q, want %q", got, want)
			}
		})
	}
}
