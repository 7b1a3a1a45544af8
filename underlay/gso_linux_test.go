package underlay

import (
	"net/netip"
	"slices"
	"testing"
	"time"
)

// TestGSOGRO: equal-size messages sent with GSO arrive as the same
// datagrams, whether the receiver splits them (GRO) or the kernel does.
func TestGSOGRO(t *testing.T) {
	sizes := make([]int, 150)
	for i := range sizes {
		sizes[i] = 1400
	}
	sizes[99] = 700 // a short segment ends a GSO run
	for _, lo := range loopbacks {
		for _, rx := range []struct {
			name    string
			noGRO   bool
			perRead int // small batches exercise carrying segments over
		}{{"gro", false, 7}, {"gro-full-batch", false, BatchSize}, {"kernel-split", true, BatchSize}} {
			t.Run(lo.name+"/"+rx.name, func(t *testing.T) {
				a := openConn(t, Config{UDP: netip.AddrPortFrom(lo.addr, 0)})
				b := openConn(t, Config{UDP: netip.AddrPortFrom(lo.addr, 0), DisableGRO: rx.noGRO})
				r := readerFor(t, b, false, lo.addr.Is6())
				if !readerFor(t, a, false, lo.addr.Is6()).sock.gso.Load() || r.GRO() == rx.noGRO {
					t.Skip("kernel has no UDP GSO/GRO on loopback")
				}
				sent := newMessages(len(sizes))
				fillBatch(sent, sizes, netip.AddrPortFrom(lo.addr, b.Port()), false)
				if err := a.WriteBatch(sent); err != nil {
					t.Fatal(err)
				}
				got := readAll(t, r, len(sent), rx.perRead)
				checkSame(t, sent, got, netip.AddrPortFrom(lo.addr, a.Port()))
				ca, cb := a.Counters(), b.Counters()
				if ca.TxGSO != uint64(len(sent)) {
					t.Errorf("TxGSO = %d, want all %d packets sent as segments", ca.TxGSO, len(sent))
				}
				if rx.noGRO && cb.RxGRO != 0 || !rx.noGRO && cb.RxGRO == 0 {
					t.Errorf("RxGRO = %d with GRO %v", cb.RxGRO, !rx.noGRO)
				}
			})
		}
	}
}

// TestCoalesce: which messages build puts into one GSO send.
func TestCoalesce(t *testing.T) {
	p1 := netip.MustParseAddrPort("192.0.2.1:4500")
	p2 := netip.MustParseAddrPort("192.0.2.2:4500")
	same := func(n, size int) []int {
		s := make([]int, n)
		for i := range s {
			s[i] = size
		}
		return s
	}
	tests := []struct {
		name        string
		sizes       []int
		peers       []netip.AddrPort // per message, default p1
		raw, v6     bool
		noGSO       bool
		noGSOBefore int
		want        []int // messages per header
	}{
		{name: "equal sizes", sizes: same(5, 1400), want: []int{5}},
		{name: "short last ends run", sizes: []int{100, 100, 50, 100}, want: []int{3, 1}},
		{name: "larger breaks run", sizes: []int{100, 200, 200}, want: []int{1, 2}},
		{name: "peer change breaks run", sizes: same(4, 100), peers: []netip.AddrPort{p1, p1, p2, p2}, want: []int{2, 2}},
		{name: "64 segments at most", sizes: same(70, 100), want: []int{64, 6}},
		{name: "IPv4 64 KiB limit", sizes: same(50, 1400), want: []int{46, 4}},
		{name: "IPv6 64 KiB limit", sizes: same(50, 1400), v6: true, want: []int{46, 4}},
		{name: "raw never coalesces", sizes: same(3, 100), raw: true, want: []int{1, 1, 1}},
		{name: "GSO off", sizes: same(3, 100), noGSO: true, want: []int{1, 1, 1}},
		{name: "retry without GSO", sizes: same(5, 100), noGSOBefore: 3, want: []int{1, 1, 1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sock := &socket{raw: tt.raw, v6: tt.v6}
			sock.gso.Store(!tt.noGSO)
			msgs := make([]Message, len(tt.sizes))
			for i, size := range tt.sizes {
				msgs[i] = Message{Buf: make([]byte, size), Len: size, Peer: p1}
				if tt.peers != nil {
					msgs[i].Peer = tt.peers[i]
				}
			}
			s := newWriteScratch()
			nh := s.build(sock, msgs, 0, tt.noGSOBefore)
			if got := s.count[:nh]; !slices.Equal(got, tt.want) {
				t.Errorf("headers carry %v messages, want %v", got, tt.want)
			}
		})
	}
}

// TestGSORefused: when the kernel refuses a GSO send (here EMSGSIZE: the
// segments do not fit lo's MTU of 1280), the run is resent one datagram at
// a time (fragmented by the kernel) and nothing is lost.
func TestGSORefused(t *testing.T) {
	lo := netip.MustParseAddr("127.0.0.1")
	cs := openInNetnsWith(t, func() error { return setMTU("lo", 1280) },
		Config{UDP: netip.AddrPortFrom(lo, 0)}, Config{UDP: netip.AddrPortFrom(lo, 0)})
	a, b := cs[0], cs[1]
	sent := newMessages(20)
	fillBatch(sent, []int{1400}, netip.AddrPortFrom(lo, b.Port()), false)
	if err := a.WriteBatch(sent); err != nil {
		t.Fatalf("WriteBatch: %v", err)
	}
	got := readAll(t, readerFor(t, b, false, false), len(sent), BatchSize)
	checkSame(t, sent, got, netip.AddrPortFrom(lo, a.Port()))
	if ctr := a.Counters(); ctr.TxGSO != 0 || ctr.TxPackets != 20 || ctr.SendErrors != 0 {
		t.Errorf("counters %+v: want 20 packets, none by GSO, no errors", ctr)
	}
	// EMSGSIZE is about this path, not the device: GSO stays on.
	if !readerFor(t, a, false, false).sock.gso.Load() {
		t.Errorf("GSO turned off after EMSGSIZE")
	}
}

// TestReadBatchBorrowed: the segments of coalesced datagrams are handed up
// where they arrived, in the Reader's buffers (no copy), and are the
// packets sent, in order, also when a read takes fewer than a datagram
// holds; without GRO they land in the caller's buffers as ReadBatch puts
// them.
func TestReadBatchBorrowed(t *testing.T) {
	sizes := make([]int, 150)
	for i := range sizes {
		sizes[i] = 1400
	}
	sizes[99] = 700
	for _, rx := range []struct {
		name    string
		noGRO   bool
		perRead int
	}{{"gro", false, 7}, {"gro-full-batch", false, BatchSize}, {"kernel-split", true, BatchSize}} {
		t.Run(rx.name, func(t *testing.T) {
			lo := netip.MustParseAddr("127.0.0.1")
			a := openConn(t, Config{UDP: netip.AddrPortFrom(lo, 0)})
			b := openConn(t, Config{UDP: netip.AddrPortFrom(lo, 0), DisableGRO: rx.noGRO})
			r := readerFor(t, b, false, false)
			if !readerFor(t, a, false, false).sock.gso.Load() || r.GRO() == rx.noGRO {
				t.Skip("kernel has no UDP GSO/GRO on loopback")
			}
			sent := newMessages(len(sizes))
			fillBatch(sent, sizes, netip.AddrPortFrom(lo, b.Port()), false)
			if err := a.WriteBatch(sent); err != nil {
				t.Fatal(err)
			}
			if err := r.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
				t.Fatal(err)
			}
			mine := newMessages(rx.perRead)
			msgs := make([]Message, rx.perRead)
			var got []Message
			borrowed := 0
			for len(got) < len(sent) {
				copy(msgs, mine)
				n, err := r.ReadBatchBorrowed(msgs)
				if err != nil {
					t.Fatalf("ReadBatchBorrowed after %d of %d: %v", len(got), len(sent), err)
				}
				for i, m := range msgs[:n] {
					if &m.Buf[0] != &mine[i].Buf[0] {
						borrowed++
					} else if m.Off != mine[i].Off {
						t.Fatalf("packet in the caller's buffer at %d, want at Off %d", m.Off, mine[i].Off)
					}
					c := m
					c.Buf = append([]byte(nil), m.Buf...)
					got = append(got, c)
				}
			}
			checkSame(t, sent, got, netip.AddrPortFrom(lo, a.Port()))
			if rx.noGRO && borrowed != 0 || !rx.noGRO && borrowed == 0 {
				t.Errorf("%d packets lent from the Reader's buffers with GRO %v", borrowed, !rx.noGRO)
			}
			if c := b.Counters(); c.RxPackets != uint64(len(sent)) {
				t.Errorf("RxPackets = %d, want %d", c.RxPackets, len(sent))
			}
		})
	}
}
