package gso

import (
	"encoding/binary"
	"errors"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip/checksum"

	"github.com/ipsecd/ipsecd/internal/iphdr"
	"github.com/ipsecd/ipsecd/internal/vnet"
)

// tsoFrame returns a TCP over IPv4 super-packet as a TUN reads it: 3,000
// payload bytes to cut at mss 1,000 (3 segments), TCP options, CWR|PSH.
func tsoFrame() []byte {
	const l3, l4, payload = 20, 32, 3000
	pkt := make([]byte, l3+l4+payload)
	ip := iphdr.IPv4(pkt)
	pkt[0], pkt[8], pkt[9] = 0x45, 64, iphdr.ProtocolTCP
	copy(pkt[12:], []byte{192, 0, 2, 1, 198, 51, 100, 7})
	ip.SetTotalLen(len(pkt))
	ip.SetID(0xffff)
	ip.UpdateChecksum()
	tcp := pkt[l3:]
	binary.BigEndian.PutUint32(tcp[4:], 0xfffffe00)
	tcp[12], tcp[13] = (l4/4)<<4, iphdr.TCPFlagCwr|iphdr.TCPFlagPsh|0x10
	for i := l3 + l4; i < len(pkt); i++ {
		pkt[i] = byte(i * 7)
	}
	// The ECN bit: the kernel sets it when the super-packet carries CWR
	// (SKB_GSO_TCP_ECN); wireguard/tun refused such frames.
	h := vnet.Header{Flags: vnet.FlagNeedsCsum, GSOType: vnet.GSOTCPv4 | vnet.GSOECN, HdrLen: l3 + l4, GSOSize: 1000, CsumStart: l3, CsumOffset: 16}
	frame := make([]byte, vnet.HeaderLen+len(pkt), vnet.HeaderLen+len(pkt)+Tailroom)
	h.Encode(frame)
	copy(frame[vnet.HeaderLen:], pkt)
	return frame
}

// checkSegments lays out every segment of f in turn, scribbling over the
// trailer room as the seal does, and checks that each is a whole packet
// with valid checksums whose payload is the super-packet's next chunk.
func checkSegments(t testing.TB, f *Frame, payload []byte) {
	total := 0
	for k := range f.Segments() {
		seg := f.Segment(k)
		if len(seg) != f.SegmentLen(k) || cap(seg)-len(seg) < Tailroom {
			t.Fatalf("segment %d: %d bytes (cap %d), want %d and Tailroom more", k, len(seg), cap(seg), f.SegmentLen(k))
		}
		total += len(seg)
		if f.gso {
			h := f.h
			if h.V4 && (!iphdr.IPv4(seg).ChecksumValid() || iphdr.IPv4(seg).TotalLen() != len(seg)) {
				t.Fatalf("segment %d: bad IPv4 header % x", k, seg[:h.L3Len])
			}
			l4 := seg[h.L3Len:]
			sum := checksum.Combine(h.srcDst, uint16(len(l4)))
			if c := checksum.Checksum(l4, sum); c != 0xffff {
				t.Fatalf("segment %d: transport checksum does not verify (sum %#x)", k, c)
			}
			want := payload[k*h.MSS : min((k+1)*h.MSS, len(payload))]
			if got := seg[h.HdrLen:]; string(got) != string(want) {
				t.Fatalf("segment %d: payload differs from the super-packet's chunk", k)
			}
			if h.TCP {
				fl := iphdr.TCP(l4).Flags()
				if (k > 0) == (fl&iphdr.TCPFlagCwr != 0) && h.flags&iphdr.TCPFlagCwr != 0 {
					t.Fatalf("segment %d: flags %#x, CWR only on the first", k, fl)
				}
				if (k < f.Segments()-1) && fl&(iphdr.TCPFlagFin|iphdr.TCPFlagPsh) != 0 {
					t.Fatalf("segment %d: flags %#x, FIN and PSH only on the last", k, fl)
				}
			}
		}
		tail := seg[len(seg):cap(seg)]
		for i := range tail {
			tail[i] = 0xee // the ESP trailer
		}
	}
	if total != f.Bytes() {
		t.Fatalf("segments hold %d bytes, Bytes says %d", total, f.Bytes())
	}
}

func TestFrameSegments(t *testing.T) {
	frame := tsoFrame()
	payload := append([]byte(nil), frame[vnet.HeaderLen+52:]...)
	var f Frame
	if err := f.Parse(frame, 128, 1500); err != nil {
		t.Fatal(err)
	}
	if f.Segments() != 3 {
		t.Fatalf("%d segments, want 3", f.Segments())
	}
	f.Segment(0) // asked for twice, as SealSegments does
	checkSegments(t, &f, payload)
	seg := f.Segment(2)
	if got := iphdr.IPv4(seg).ID(); got != 0x0001 {
		t.Errorf("last segment's IPv4 id %#x, want 0x0001 (0xffff+2)", got)
	}
	if got := iphdr.TCP(seg[20:]).Seq(); got != 0x5d0 {
		t.Errorf("last segment's seq %#x, want 0x5d0 (0xfffffe00+2000, wrapped)", got)
	}
}

// Frames the header misdescribes are refused with ErrFrame, oversized
// ones with ErrTooLarge; none panics.
func TestFrameMalformed(t *testing.T) {
	for _, tt := range []struct {
		name    string
		edit    func(h *vnet.Header, pkt []byte) []byte
		max     int
		wantErr error
	}{
		{"gso type udp (ufo)", func(h *vnet.Header, pkt []byte) []byte { h.GSOType = vnet.GSOUDP; return pkt }, 0, ErrFrame},
		{"tcpv6 on ipv4", func(h *vnet.Header, pkt []byte) []byte { h.GSOType = vnet.GSOTCPv6; return pkt }, 0, ErrFrame},
		{"usov4 on tcp", func(h *vnet.Header, pkt []byte) []byte { h.GSOType = vnet.GSOUDPL4; h.CsumOffset = 6; return pkt }, 0, ErrFrame},
		{"csum start past the ip header", func(h *vnet.Header, pkt []byte) []byte { h.CsumStart = 24; return pkt }, 0, ErrFrame},
		{"csum start inside it", func(h *vnet.Header, pkt []byte) []byte { h.CsumStart = 8; return pkt }, 0, ErrFrame},
		{"csum offset not tcp's", func(h *vnet.Header, pkt []byte) []byte { h.CsumOffset = 6; return pkt }, 0, ErrFrame},
		{"zero segment size", func(h *vnet.Header, pkt []byte) []byte { h.GSOSize = 0; return pkt }, 0, ErrFrame},
		{"tcp data offset 4", func(h *vnet.Header, pkt []byte) []byte { pkt[32] = 4 << 4; return pkt }, 0, ErrFrame},
		{"headers only", func(h *vnet.Header, pkt []byte) []byte { return pkt[:52] }, 0, ErrFrame},
		{"truncated tcp header", func(h *vnet.Header, pkt []byte) []byte { return pkt[:30] }, 0, ErrFrame},
		{"ip says udp", func(h *vnet.Header, pkt []byte) []byte { pkt[9] = iphdr.ProtocolUDP; return pkt }, 0, ErrFrame},
		{"no-gso csum past the end", func(h *vnet.Header, pkt []byte) []byte { h.GSOType = vnet.GSONone; h.CsumStart = 3050; return pkt }, 0, ErrFrame},
		{"more segments than buffers", func(h *vnet.Header, pkt []byte) []byte { return pkt }, 2, ErrTooLarge},
		{"segments longer than buffers", func(h *vnet.Header, pkt []byte) []byte { h.GSOSize = 1500; return pkt }, 0, ErrTooLarge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			frame := tsoFrame()
			var h vnet.Header
			h.Decode(frame)
			pkt := tt.edit(&h, frame[vnet.HeaderLen:])
			frame = frame[:vnet.HeaderLen+len(pkt)]
			h.Encode(frame)
			maxSeg := 128
			if tt.max != 0 {
				maxSeg = tt.max
			}
			var f Frame
			if err := f.Parse(frame, maxSeg, 1500); !errors.Is(err, tt.wantErr) {
				t.Fatalf("Parse: %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// FuzzFrame feeds arbitrary frames to Parse and cuts what it accepts:
// nothing panics, and every accepted frame's segments are whole packets
// whose checksums verify.
func FuzzFrame(f *testing.F) {
	f.Add(tsoFrame())
	v6 := tsoFrame()
	f.Add(v6[:200])
	f.Fuzz(func(t *testing.T, in []byte) {
		buf := make([]byte, len(in), len(in)+Tailroom)
		copy(buf, in)
		var fr Frame
		if fr.Parse(buf, 64, 1500) != nil {
			return
		}
		var payload []byte
		if fr.gso {
			payload = append(payload, buf[vnet.HeaderLen+fr.h.HdrLen:]...)
		}
		checkSegments(t, &fr, payload)
	})
}
