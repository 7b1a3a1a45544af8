package gro

import (
	"bytes"
	"net/netip"
	"slices"
	"testing"

	"github.com/ipsecd/ipsecd/internal/gro/grotest"
	"github.com/ipsecd/ipsecd/internal/iphdr"
	"github.com/ipsecd/ipsecd/internal/vnet"
	"github.com/ipsecd/ipsecd/sa/satest"
)

const offset = 16 // headroom in front of each test packet

var (
	flow4 = satest.TCPFlow{Src: netip.MustParseAddrPort("192.0.2.1:40000"), Dst: netip.MustParseAddrPort("203.0.113.1:5201"),
		Seq: 0xfffff000, ID: 0xfffe, Timestamps: true} // both wrap inside a batch
	flow4b = satest.TCPFlow{Src: netip.MustParseAddrPort("192.0.2.2:40001"), Dst: netip.MustParseAddrPort("203.0.113.1:5201"), Seq: 1000}
	flow6  = satest.TCPFlow{Src: netip.MustParseAddrPort("[2001:db8::1]:40000"), Dst: netip.MustParseAddrPort("[2001:db8::2]:5201"),
		Seq: 7, Timestamps: true}
)

func sizes(n, size int, last ...int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = size
	}
	return append(s, last...)
}

// withHeadroom puts each packet behind offset bytes of headroom.
func withHeadroom(pkts [][]byte) [][]byte {
	bufs := make([][]byte, len(pkts))
	for i, p := range pkts {
		bufs[i] = append(make([]byte, offset), p...)
	}
	return bufs
}

// resegment is grotest.Resegment, failing the test on error.
func resegment(t *testing.T, parts [][]byte) [][]byte {
	t.Helper()
	segs, err := grotest.Resegment(parts)
	if err != nil {
		t.Fatal(err)
	}
	return segs
}

// run plans pkts and returns what the kernel makes of each frame, and how
// many packets each frame carried.
func run(t *testing.T, c *Coalescer, pkts [][]byte) (got [][]byte, perFrame []int) {
	t.Helper()
	bufs := withHeadroom(pkts)
	c.Plan(bufs, offset)
	for f := range c.Frames() {
		parts, n := c.Frame(f)
		segs := resegment(t, parts)
		if len(segs) != n {
			t.Fatalf("frame %d: resegmented into %d packets, Frame says %d", f, len(segs), n)
		}
		got = append(got, segs...)
		perFrame = append(perFrame, n)
	}
	return got, perFrame
}

func mutate(p []byte, f func(p []byte)) []byte {
	p = slices.Clone(p)
	f(p)
	return p
}

// TestCoalesce: which packets of a batch become one super-packet, and
// that the kernel's segmentation of each gives back the packets of the
// batch byte for byte, each flow in its order.
func TestCoalesce(t *testing.T) {
	one := satest.TCPSegments(flow4, sizes(44, 1396), 0)
	v6 := satest.TCPSegments(flow6, sizes(10, 1376, 500), 0x18)
	other := satest.TCPSegments(flow4b, sizes(6, 1000), 0)
	udp := satest.IPv4UDP(netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("203.0.113.1"), 300)
	tests := []struct {
		name     string
		pkts     [][]byte
		want     []int // packets per frame
		reorders bool  // the kernel gets the packets in another order (flows interleaved)
	}{
		{name: "one flow, 44 segments", pkts: one, want: []int{44}},
		{name: "IPv6, short last with PSH", pkts: v6, want: []int{11}},
		{name: "PSH ends a super-packet", pkts: satest.TCPSegments(flow4b, sizes(3, 100), 0x18), want: []int{3}},
		{name: "PSH in the middle", pkts: slices.Concat(satest.TCPSegments(flow4b, sizes(3, 100), 0x18),
			satest.TCPSegments(satest.TCPFlow{Src: flow4b.Src, Dst: flow4b.Dst, Seq: 1300, ID: 3}, sizes(2, 100), 0)), want: []int{3, 2}},
		{name: "short segment ends a super-packet", pkts: satest.TCPSegments(flow4b, sizes(4, 100, 50, 100), 0), want: []int{5, 1}},
		{name: "larger after smaller", pkts: satest.TCPSegments(flow4b, []int{50, 100}, 0), want: []int{1, 1}},
		{name: "64 KiB at most", pkts: satest.TCPSegments(flow4b, sizes(50, 1400), 0), want: []int{46, 4}},
		{name: "out of order", pkts: [][]byte{one[0], one[1], one[3], one[2], one[4]}, want: []int{2, 1, 1, 1}},
		{name: "duplicate", pkts: [][]byte{one[0], one[1], one[1], one[2]}, want: []int{2, 2}},
		{name: "two flows interleaved", pkts: [][]byte{other[0], one[0], other[1], one[1], other[2], one[2]}, want: []int{3, 3}, reorders: true},
		{name: "not TCP in between", pkts: [][]byte{one[0], udp, one[1], one[2]}, want: []int{3, 1}, reorders: true},
		{name: "SYN", pkts: [][]byte{one[0], mutate(one[1], func(p []byte) { p[33] |= 0x02; satest.SetTCPChecksum(p) }), one[2]}, want: []int{1, 1, 1}},
		{name: "ECE", pkts: [][]byte{one[0], mutate(one[1], func(p []byte) { p[33] |= 0x40; satest.SetTCPChecksum(p) })}, want: []int{1, 1}},
		{name: "no payload", pkts: [][]byte{satest.TCPSegments(flow4b, []int{0}, 0)[0], other[0]}, want: []int{1, 1}},
		{name: "IPv4 id not counting up", pkts: [][]byte{one[0], mutate(one[1], func(p []byte) {
			iphdr.IPv4(p).SetID(7)
			iphdr.IPv4(p).UpdateChecksum()
		}), one[2]}, want: []int{1, 1, 1}},
		{name: "IPv4 header checksum wrong", pkts: [][]byte{one[0], mutate(one[1], func(p []byte) { p[10] ^= 1 }), one[2]}, want: []int{1, 1, 1}},
		{name: "TTL differs", pkts: [][]byte{one[0], mutate(one[1], func(p []byte) {
			p[8]--
			iphdr.IPv4(p).UpdateChecksum()
		})}, want: []int{1, 1}},
		{name: "ECN CE on one", pkts: [][]byte{one[0], mutate(one[1], func(p []byte) {
			p[1] |= 3
			iphdr.IPv4(p).UpdateChecksum()
		})}, want: []int{1, 1}},
		{name: "window differs", pkts: [][]byte{one[0], mutate(one[1], func(p []byte) { p[35]++; satest.SetTCPChecksum(p) })}, want: []int{1, 1}},
		{name: "timestamp differs", pkts: [][]byte{one[0], mutate(one[1], func(p []byte) { p[51]++; satest.SetTCPChecksum(p) })}, want: []int{1, 1}},
		{name: "ack differs", pkts: [][]byte{one[0], mutate(one[1], func(p []byte) { p[31]++; satest.SetTCPChecksum(p) })}, want: []int{1, 1}},
		{name: "IPv4 fragment", pkts: [][]byte{one[0], mutate(one[1], func(p []byte) {
			p[6] |= 0x20
			iphdr.IPv4(p).UpdateChecksum()
		})}, want: []int{1, 1}},
		{name: "as many flows as stay open", pkts: manyFlows(maxOpen, 3), want: sizes(maxOpen, 3), reorders: true},
		// Round-robin over more flows than stay open: each evicts the
		// frame the next would join. Coalescing less, never wrongly.
		{name: "more flows than stay open", pkts: manyFlows(maxOpen+2, 2), want: sizes(2*(maxOpen+2), 1), reorders: true},
	}
	var c Coalescer
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := make([][]byte, len(tt.pkts))
			for i, p := range tt.pkts {
				in[i] = slices.Clone(p)
			}
			got, perFrame := run(t, &c, tt.pkts)
			if !slices.Equal(perFrame, tt.want) {
				t.Errorf("packets per frame %v, want %v", perFrame, tt.want)
			}
			if !tt.reorders {
				if len(got) != len(in) {
					t.Fatalf("kernel gets %d packets, want %d", len(got), len(in))
				}
				for i := range in {
					if !bytes.Equal(got[i], in[i]) {
						t.Fatalf("packet %d:\n got %x\nwant %x", i, got[i], in[i])
					}
				}
				return
			}
			// Interleaved flows: the same packets, each flow in order.
			if !grotest.SameFlowsInOrder(got, in) {
				t.Fatalf("kernel gets another set of packets or a flow out of order")
			}
		})
	}
}

// manyFlows is rounds segments of each of n flows, round-robin.
func manyFlows(n, rounds int) [][]byte {
	var flows [][][]byte
	for i := range n {
		f := satest.TCPFlow{Src: netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(10 + i)}), 40000), Dst: flow4b.Dst, Seq: 5}
		flows = append(flows, satest.TCPSegments(f, sizes(rounds, 100), 0))
	}
	var pkts [][]byte
	for r := range rounds {
		for i := range n {
			pkts = append(pkts, flows[i][r])
		}
	}
	return pkts
}

// TestPlanAllocs: a Coalescer allocates nothing once it has seen a batch
// as large.
func TestPlanAllocs(t *testing.T) {
	pkts := satest.TCPSegments(flow4, sizes(44, 1396), 0)
	bufs := withHeadroom(pkts)
	orig := withHeadroom(pkts)
	var c Coalescer
	c.Plan(bufs, offset)
	allocs := testing.AllocsPerRun(50, func() {
		for i := range bufs {
			copy(bufs[i], orig[i])
		}
		c.Plan(bufs, offset)
		for f := range c.Frames() {
			c.Frame(f)
		}
	})
	if allocs != 0 {
		t.Errorf("Plan and Frame: %v allocations, want 0", allocs)
	}
}

// FuzzPlan: any batch, of any bytes, is planned without a panic into
// frames that carry every packet once, in the batch's order per frame;
// a frame of one packet is that packet, unchanged.
func FuzzPlan(f *testing.F) {
	one := satest.TCPSegments(flow4, sizes(3, 100, 20), 0x18)
	v6 := satest.TCPSegments(flow6, sizes(2, 64), 0)
	f.Add(slices.Concat(one...), uint16(152), uint16(152), uint16(152))
	f.Add(slices.Concat(v6...), uint16(136), uint16(136), uint16(136))
	f.Add([]byte{0x45, 0, 0, 20}, uint16(4), uint16(0), uint16(0))
	f.Fuzz(func(t *testing.T, data []byte, n1, n2, n3 uint16) {
		var pkts [][]byte
		for _, n := range []uint16{n1, n2, n3, n1, n2} {
			k := min(int(n), len(data))
			pkts = append(pkts, data[:k])
			data = data[k:]
		}
		pkts = append(pkts, data)
		in := make([][]byte, len(pkts))
		for i := range pkts {
			in[i] = slices.Clone(pkts[i])
		}
		bufs := withHeadroom(pkts)
		var c Coalescer
		c.Plan(bufs, offset)
		seen := 0
		for fr := range c.Frames() {
			parts, n := c.Frame(fr)
			seen += n
			if n == 1 {
				var h vnet.Header
				h.Decode(parts[0])
				if len(parts) != 1 || h != (vnet.Header{}) || !slices.ContainsFunc(in, func(p []byte) bool { return bytes.Equal(p, parts[0][vnet.HeaderLen:]) }) {
					t.Fatalf("frame %d of one packet is not a packet of the batch as it was", fr)
				}
				continue
			}
			// Each segment the kernel makes is one of the batch, but
			// for its TCP checksum: that is computed anew, and a
			// wrong one in the batch is not looked at (the ICV
			// vouched for the packet).
			for _, seg := range resegment(t, parts) {
				ihl := 20
				if seg[0]>>4 == 6 {
					ihl = 40
				}
				if !slices.ContainsFunc(in, func(p []byte) bool {
					return len(p) == len(seg) && bytes.Equal(p[:ihl+16], seg[:ihl+16]) && bytes.Equal(p[ihl+18:], seg[ihl+18:])
				}) {
					t.Fatalf("frame %d: the kernel would make a packet not in the batch: %x", fr, seg)
				}
			}
		}
		if seen != len(pkts) {
			t.Fatalf("frames carry %d packets, want %d", seen, len(pkts))
		}
	})
}

// BenchmarkPlan: planning and handing out the frames of one datagram's
// worth of segments of one flow (44 of 1,396 bytes).
func BenchmarkPlan(b *testing.B) {
	pkts := satest.TCPSegments(flow4, sizes(44, 1396), 0)
	bufs := withHeadroom(pkts)
	orig := withHeadroom(pkts)
	var c Coalescer
	b.ReportAllocs()
	b.SetBytes(int64(44 * len(pkts[0])))
	for b.Loop() {
		for i := range bufs {
			copy(bufs[i][:offset+60], orig[i]) // the headers Plan rewrites
		}
		c.Plan(bufs, offset)
		for f := range c.Frames() {
			c.Frame(f)
		}
	}
}
