package datapath

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

// packet builds a minimal IPv4 or IPv6 packet with TCP/UDP ports.
func packet(src, dst string, proto byte, sport, dport uint16) []byte {
	s, d := netip.MustParseAddr(src), netip.MustParseAddr(dst)
	var b []byte
	if s.Is4() {
		b = make([]byte, 20+8)
		b[0] = 0x45
		b[9] = proto
		copy(b[12:16], s.AsSlice())
		copy(b[16:20], d.AsSlice())
		binary.BigEndian.PutUint16(b[2:4], uint16(len(b)))
	} else {
		b = make([]byte, 40+8)
		b[0] = 0x60
		b[6] = proto
		copy(b[8:24], s.AsSlice())
		copy(b[24:40], d.AsSlice())
	}
	l4 := b[len(b)-8:]
	binary.BigEndian.PutUint16(l4[0:2], sport)
	binary.BigEndian.PutUint16(l4[2:4], dport)
	return b
}

func TestFlowQueueSymmetric(t *testing.T) {
	for _, tt := range []struct {
		name     string
		src, dst string
		proto    byte
	}{
		{"tcp4", "198.51.100.1", "203.0.113.1", 6},
		{"udp4", "198.51.100.7", "203.0.113.9", 17},
		{"tcp6", "2001:db8:a::1", "2001:db8:b::1", 6},
		{"icmp4", "198.51.100.1", "203.0.113.1", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for queues := 1; queues <= 16; queues++ {
				fwd := flowQueue(packet(tt.src, tt.dst, tt.proto, 40000, 5201), queues)
				rev := flowQueue(packet(tt.dst, tt.src, tt.proto, 5201, 40000), queues)
				if fwd != rev {
					t.Errorf("queues %d: forward on %d, reverse on %d, want the same", queues, fwd, rev)
				}
				if fwd < 0 || fwd >= queues {
					t.Errorf("queues %d: got queue %d, out of range", queues, fwd)
				}
			}
		})
	}
}

// TestFlowQueueSpreads checks that many flows use every queue, so that
// multiqueue interfaces spread inbound work.
func TestFlowQueueSpreads(t *testing.T) {
	const queues, flows = 4, 400
	var count [queues]int
	for i := range flows {
		count[flowQueue(packet("198.51.100.1", "203.0.113.1", 6, uint16(40000+i), 5201), queues)]++
	}
	for q, c := range count {
		if c < flows/queues/2 {
			t.Errorf("queue %d got %d of %d flows, want at least %d: %v", q, c, flows, flows/queues/2, count)
		}
	}
}

func TestFlowQueueShortPackets(t *testing.T) {
	for _, b := range [][]byte{nil, {0x45}, {0x60, 0, 0}, {0x00}, make([]byte, 19)} {
		if q := flowQueue(b, 4); q != 0 {
			t.Errorf("flowQueue(%x) = %d, want 0", b, q)
		}
	}
}

func TestFlowQueueAllocs(t *testing.T) {
	p := packet("198.51.100.1", "203.0.113.1", 6, 40000, 5201)
	if n := testing.AllocsPerRun(100, func() { flowQueue(p, 4) }); n != 0 {
		t.Errorf("flowQueue allocates %v times, want 0", n)
	}
}

// FuzzFlowQueue feeds flowQueue arbitrary bytes as an inbound cleartext
// packet: it must not panic and must stay within the queues.
func FuzzFlowQueue(f *testing.F) {
	f.Add(packet("198.51.100.1", "203.0.113.1", 6, 40000, 5201), 4)
	f.Add(packet("2001:db8:a::1", "2001:db8:b::1", 17, 53, 5353), 3)
	f.Add([]byte{0x4f}, 2)
	f.Fuzz(func(t *testing.T, pkt []byte, queues int) {
		queues = queues%64 + 1
		if queues < 1 {
			queues = -queues + 1
		}
		if q := flowQueue(pkt, queues); q < 0 || q >= queues {
			t.Fatalf("flowQueue(%x, %d) = %d, out of range", pkt, queues, q)
		}
	})
}

func BenchmarkFlowQueue(b *testing.B) {
	for _, tt := range []struct {
		name string
		pkt  []byte
	}{
		{"v4tcp", packet("198.51.100.1", "203.0.113.1", 6, 40000, 5201)},
		{"v6udp", packet("2001:db8:a::1", "2001:db8:b::1", 17, 53, 5353)},
	} {
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			q := 0
			for b.Loop() {
				q += flowQueue(tt.pkt, 4)
			}
			sinkQueue = q
		})
	}
}

// sinkQueue keeps BenchmarkFlowQueue's calls from being optimised away.
var sinkQueue int
