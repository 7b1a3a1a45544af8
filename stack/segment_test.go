package stack

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"testing"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	gvstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// superPacket describes a TCP packet as netstack's TCP hands it to a
// host-GSO endpoint.
type superPacket struct {
	v6      bool
	payload []byte
	pieces  []int // payload split into views of these sizes (rest last)
	mss     int
	flags   header.TCPFlags
	opts    []byte // TCP options, a multiple of 4 bytes
	gso     bool   // GSOOptions set (host GSO), with a partial checksum
}

var (
	spSrc4 = netip.MustParseAddr("192.0.2.1")
	spDst4 = netip.MustParseAddr("198.51.100.7")
	spSrc6 = netip.MustParseAddr("2001:db8::1")
	spDst6 = netip.MustParseAddr("2001:db8:1::9")
)

const (
	spSeq = 0xfffff000 // wraps inside a 64 KiB packet
	spAck = 0x01020304
	spID  = 0xfffe // wraps too
)

// build makes the PacketBuffer, headers pushed in front of the payload
// views as netstack pushes them; the TCP checksum is left partial (the
// pseudo-header sum, length included) when gso is set, as buildTCPHdr
// leaves it.
func (sp superPacket) build() *gvstack.PacketBuffer {
	var payload buffer.Buffer
	rest := sp.payload
	var orig []*buffer.View
	for _, n := range append(sp.pieces, len(rest)) {
		n = min(n, len(rest))
		if n == 0 {
			continue
		}
		v := buffer.NewViewWithData(rest[:n])
		orig = append(orig, v)
		payload.Append(v.Clone()) // a shared chunk: never merged
		rest = rest[n:]
	}
	for _, v := range orig {
		v.Release()
	}
	pkt := gvstack.NewPacketBuffer(gvstack.PacketBufferOptions{ReserveHeaderBytes: 128, Payload: payload})
	tcpLen := header.TCPMinimumSize + len(sp.opts)
	tcp := header.TCP(pkt.TransportHeader().Push(tcpLen))
	tcp.Encode(&header.TCPFields{
		SrcPort: 40000, DstPort: 443, SeqNum: spSeq, AckNum: spAck,
		DataOffset: uint8(tcpLen), Flags: sp.flags, WindowSize: 512,
	})
	copy(tcp[header.TCPMinimumSize:], sp.opts)
	src, dst := spSrc4, spDst4
	if sp.v6 {
		src, dst = spSrc6, spDst6
	}
	tsrc, tdst := tcpip.AddrFromSlice(src.AsSlice()), tcpip.AddrFromSlice(dst.AsSlice())
	xsum := header.PseudoHeaderChecksum(header.TCPProtocolNumber, tsrc, tdst, uint16(pkt.Size()))
	if sp.gso {
		tcp.SetChecksum(xsum)
	} else {
		xsum = checksum.Combine(xsum, pkt.Data().Checksum())
		tcp.SetChecksum(^tcp.CalculateChecksum(xsum))
	}
	size := pkt.Size()
	gsoType := gvstack.GSOTCPv4
	if sp.v6 {
		gsoType = gvstack.GSOTCPv6
		ip := header.IPv6(pkt.NetworkHeader().Push(header.IPv6MinimumSize))
		ip.Encode(&header.IPv6Fields{
			PayloadLength: uint16(size), TransportProtocol: header.TCPProtocolNumber,
			HopLimit: 64, SrcAddr: tsrc, DstAddr: tdst,
		})
		pkt.NetworkProtocolNumber = header.IPv6ProtocolNumber
	} else {
		ip := header.IPv4(pkt.NetworkHeader().Push(header.IPv4MinimumSize))
		ip.Encode(&header.IPv4Fields{
			TotalLength: uint16(size + header.IPv4MinimumSize), ID: spID, Flags: header.IPv4FlagDontFragment,
			TTL: 64, Protocol: uint8(header.TCPProtocolNumber), SrcAddr: tsrc, DstAddr: tdst,
		})
		ip.SetChecksum(^ip.CalculateChecksum())
		pkt.NetworkProtocolNumber = header.IPv4ProtocolNumber
	}
	pkt.TransportProtocolNumber = header.TCPProtocolNumber
	if sp.gso {
		pkt.GSOOptions = gvstack.GSO{Type: gsoType, NeedsCsum: true, CsumOffset: header.TCPChecksumOffset, MSS: uint16(sp.mss), MaxSize: gsoMaxSize}
		if sp.v6 {
			pkt.GSOOptions.L3HdrLen = header.IPv6MinimumSize
		} else {
			pkt.GSOOptions.L3HdrLen = header.IPv4MinimumSize
		}
	}
	return pkt
}

// split runs the segmenter over pkt into buffers of bufSize bytes.
func split(t *testing.T, pkt *gvstack.PacketBuffer, bufSize int) [][]byte {
	t.Helper()
	var s segmenter
	if !s.start(pkt.IncRef()) {
		t.Fatalf("start refused the packet")
	}
	var segs [][]byte
	for !s.done() {
		buf := make([]byte, bufSize)
		n, ok := s.next(buf)
		if !ok {
			s.release()
			t.Fatalf("segment %d does not fit %d bytes", len(segs), bufSize)
		}
		segs = append(segs, buf[:n])
		if len(segs) > 1000 {
			t.Fatalf("segmenter does not finish")
		}
	}
	s.release()
	return segs
}

func TestSegmenterSplits(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	payload := make([]byte, 65000)
	for i := range payload {
		payload[i] = byte(r.Uint32())
	}
	ts := []byte{header.TCPOptionNOP, header.TCPOptionNOP, header.TCPOptionTS, 10, 0, 0, 0, 1, 0, 0, 0, 2}
	tests := []struct {
		name string
		sp   superPacket
		want int // segments
	}{
		{"v4/64k", superPacket{payload: payload, mss: 1360, flags: header.TCPFlagAck | header.TCPFlagPsh, gso: true}, 48},
		{"v6/64k", superPacket{v6: true, payload: payload, mss: 1340, flags: header.TCPFlagAck | header.TCPFlagPsh, gso: true}, 49},
		{"v4/views", superPacket{payload: payload[:10000], pieces: []int{1, 1359, 7, 3000, 2}, mss: 1360, flags: header.TCPFlagAck, gso: true}, 8},
		{"v4/options-fin-cwr", superPacket{payload: payload[:5000], mss: 1348, opts: ts, flags: header.TCPFlagAck | header.TCPFlagPsh | header.TCPFlagFin | header.TCPFlagCwr, gso: true}, 4},
		{"v6/exact-multiple", superPacket{v6: true, payload: payload[:3*1340], mss: 1340, flags: header.TCPFlagAck, gso: true}, 3},
		{"v4/one-byte-over", superPacket{payload: payload[:1361], mss: 1360, flags: header.TCPFlagAck, gso: true}, 2},
		{"v4/below-mss", superPacket{payload: payload[:1000], mss: 1360, flags: header.TCPFlagAck | header.TCPFlagPsh, gso: true}, 1},
		{"v6/pure-ack", superPacket{v6: true, mss: 1340, flags: header.TCPFlagAck, gso: true}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pkt := tt.sp.build()
			defer pkt.DecRef()
			segs := split(t, pkt, 1400+64)
			if len(segs) != tt.want {
				t.Fatalf("got %d segments, want %d", len(segs), tt.want)
			}
			var got []byte
			for i, seg := range segs {
				last := i == len(segs)-1
				l3 := header.IPv4MinimumSize
				var src, dst tcpip.Address
				if tt.sp.v6 {
					l3 = header.IPv6MinimumSize
					ip := header.IPv6(seg)
					if !ip.IsValid(len(seg)) || int(ip.PayloadLength()) != len(seg)-l3 {
						t.Fatalf("segment %d: IPv6 payload length %d, want %d", i, ip.PayloadLength(), len(seg)-l3)
					}
					src, dst = ip.SourceAddress(), ip.DestinationAddress()
				} else {
					ip := header.IPv4(seg)
					if !ip.IsValid(len(seg)) || int(ip.TotalLength()) != len(seg) {
						t.Fatalf("segment %d: IPv4 total length %d, want %d", i, ip.TotalLength(), len(seg))
					}
					if !ip.IsChecksumValid() {
						t.Fatalf("segment %d: bad IPv4 header checksum", i)
					}
					if got, want := ip.ID(), uint16(spID+i); got != want {
						t.Fatalf("segment %d: IPv4 id %#x, want %#x", i, got, want)
					}
					if ip.Flags() != header.IPv4FlagDontFragment {
						t.Fatalf("segment %d: IPv4 flags %#x, want DF", i, ip.Flags())
					}
					src, dst = ip.SourceAddress(), ip.DestinationAddress()
				}
				tcp := header.TCP(seg[l3:])
				data := tcp.Payload()
				if len(data) > tt.sp.mss {
					t.Fatalf("segment %d: %d payload bytes, more than the MSS %d", i, len(data), tt.sp.mss)
				}
				if !last && len(data) != tt.sp.mss {
					t.Fatalf("segment %d: %d payload bytes, want the MSS %d", i, len(data), tt.sp.mss)
				}
				if !tcp.IsChecksumValid(src, dst, checksum.Checksum(data, 0), uint16(len(data))) {
					t.Fatalf("segment %d: bad TCP checksum", i)
				}
				if got, want := tcp.SequenceNumber(), uint32(spSeq+len(got)); got != want {
					t.Fatalf("segment %d: seq %#x, want %#x", i, got, want)
				}
				if tcp.AckNumber() != spAck || tcp.SourcePort() != 40000 || tcp.DestinationPort() != 443 || tcp.WindowSize() != 512 {
					t.Fatalf("segment %d: ack, ports or window changed: %v", i, tcp)
				}
				if !bytes.Equal(tcp.Options(), tt.sp.opts) && !(len(tcp.Options()) == 0 && len(tt.sp.opts) == 0) {
					t.Fatalf("segment %d: options %x, want %x", i, tcp.Options(), tt.sp.opts)
				}
				want := tt.sp.flags
				if !last {
					want &^= header.TCPFlagFin | header.TCPFlagPsh
				}
				if i > 0 {
					want &^= header.TCPFlagCwr
				}
				if tcp.Flags() != want {
					t.Fatalf("segment %d: flags %v, want %v", i, tcp.Flags(), want)
				}
				got = append(got, data...)
			}
			if !bytes.Equal(got, tt.sp.payload) {
				t.Fatalf("payload differs after reassembly (%d bytes, want %d)", len(got), len(tt.sp.payload))
			}
		})
	}
}

// A packet without GSO options (UDP, ICMP, or TCP from a stack without
// offload) is copied byte for byte.
func TestSegmenterCopiesPlainPackets(t *testing.T) {
	payload := bytes.Repeat([]byte("esp"), 400)
	sp := superPacket{payload: payload, pieces: []int{100, 1}, flags: header.TCPFlagAck}
	pkt := sp.build()
	defer pkt.DecRef()
	want := pkt.ToView().AsSlice()
	segs := split(t, pkt, 1464)
	if len(segs) != 1 || !bytes.Equal(segs[0], want) {
		t.Fatalf("got %d segments, first %d bytes; want the packet's %d bytes unchanged", len(segs), len(segs[0]), len(want))
	}
}

// A packet that does not fit the buffer is refused, not truncated.
func TestSegmenterRefusesOversize(t *testing.T) {
	pkt := superPacket{payload: make([]byte, 3000)}.build()
	defer pkt.DecRef()
	var s segmenter
	if !s.start(pkt.IncRef()) {
		t.Fatal("start refused a plain packet")
	}
	defer s.release()
	if _, ok := s.next(make([]byte, 1464)); ok {
		t.Fatal("a 3040-byte packet fit a 1464-byte buffer")
	}
}

// TestSegmenterDoesNotWriteThePacket checks the ownership rule: the
// payload is shared with TCP's retransmit queue, so splitting it must
// leave every byte of it as it was.
func TestSegmenterDoesNotWriteThePacket(t *testing.T) {
	payload := bytes.Repeat([]byte{1, 2, 3, 4, 5}, 10000)
	pkt := superPacket{payload: payload, mss: 1360, flags: header.TCPFlagAck | header.TCPFlagPsh | header.TCPFlagFin, gso: true}.build()
	defer pkt.DecRef()
	before := bytes.Clone(pkt.ToView().AsSlice())
	split(t, pkt, 1464)
	if after := pkt.ToView().AsSlice(); !bytes.Equal(before, after) {
		t.Fatal("the segmenter changed the packet it read")
	}
}
