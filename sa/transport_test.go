package sa

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/ipsecd/ipsecd/internal/iphdr"
)

// Builders of transport-mode datagrams, from the outer addresses of pair's
// SAs (outer4a -> outer4b, outer6a -> outer6b), as transport mode sends them.

const (
	protoTCP     = iphdr.ProtocolTCP
	protoUDP     = iphdr.ProtocolUDP
	ipv6HopByHop = iphdr.IPv6HopByHop
	ipv6Routing  = iphdr.IPv6Routing
	ipv6Fragment = iphdr.IPv6Fragment
	ipv6DestOpts = iphdr.IPv6DestOpts

	protoNone = 59  // IPv6 no next header
	protoExp  = 253 // RFC 3692 experimentation: nothing checks its payload
)

// v4 is an IPv4 datagram carrying payload, with its lengths and header
// checksum right, DF clear, not a fragment.
func v4(proto uint8, payload []byte) []byte {
	p := make([]byte, 20+len(payload))
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	binary.BigEndian.PutUint16(p[4:], 0x1234) // id
	p[8] = 64
	p[9] = proto
	copy(p[12:], outer4a.AsSlice())
	copy(p[16:], outer4b.AsSlice())
	iphdr.IPv4(p).UpdateChecksum()
	copy(p[20:], payload)
	return p
}

// v4Flags is d with the IPv4 flags and fragment offset word set to w.
func v4Flags(d []byte, w uint16) []byte {
	d = bytes.Clone(d)
	binary.BigEndian.PutUint16(d[6:], w)
	iphdr.IPv4(d).UpdateChecksum()
	return d
}

// v6 is an IPv6 packet whose first next header is nh, followed by rest
// (extension headers and the upper layer), its payload length right.
func v6(nh uint8, rest ...[]byte) []byte {
	p := make([]byte, 40)
	p[0] = 0x60
	p[6] = nh
	p[7] = 64
	copy(p[8:], outer6a.AsSlice())
	copy(p[24:], outer6b.AsSlice())
	for _, r := range rest {
		p = append(p, r...)
	}
	binary.BigEndian.PutUint16(p[4:], uint16(len(p)-40))
	return p
}

// ext is an IPv6 options or routing header of 8*(units+1) bytes whose next
// header is nh (PadN options or routing type 0 data; only the length
// matters here).
func ext(nh uint8, units int) []byte {
	h := make([]byte, 8*(units+1))
	h[0], h[1] = nh, byte(units)
	h[2], h[3] = 1, byte(len(h)-4) // one PadN option filling the rest
	return h
}

// frag is an IPv6 fragment header (RFC 8200 §4.5): offset in 8-byte units.
func frag(nh uint8, offset uint16, more bool) []byte {
	h := make([]byte, 8)
	h[0] = nh
	w := offset << 3
	if more {
		w |= 1
	}
	binary.BigEndian.PutUint16(h[2:], w)
	binary.BigEndian.PutUint32(h[4:], 0xdb8)
	return h
}

// udp is a UDP header (length right, checksum 0) and n bytes of data.
func udp(n int) []byte {
	u := make([]byte, 8+n)
	binary.BigEndian.PutUint16(u[0:], 4500)
	binary.BigEndian.PutUint16(u[2:], 4501)
	binary.BigEndian.PutUint16(u[4:], uint16(len(u)))
	for i := 8; i < len(u); i++ {
		u[i] = byte(i)
	}
	return u
}

// tcp is a TCP segment with a header of hdrWords 32-bit words and n bytes
// of data.
func tcp(hdrWords, n int) []byte {
	s := make([]byte, max(hdrWords*4, 20)+n)
	binary.BigEndian.PutUint16(s[0:], 443)
	binary.BigEndian.PutUint16(s[2:], 50000)
	s[12] = byte(hdrWords << 4)
	s[13] = 0x18 // PSH ACK
	for i := hdrWords * 4; i < len(s); i++ {
		s[i] = byte(i)
	}
	return s
}

// echo is an ICMP (or ICMPv6) echo request with n bytes of data.
func echo(n int) []byte {
	e := make([]byte, 8+n)
	e[0] = 8
	for i := 8; i < len(e); i++ {
		e[i] = byte(i)
	}
	return e
}

// set returns a copy of b with b[at:] overwritten by v.
func set(b []byte, at int, v ...byte) []byte {
	b = bytes.Clone(b)
	copy(b[at:], v)
	return b
}

// refusedInTransport are datagrams transport mode must not seal: the
// peer's rebuilt header would misdescribe them. Each is otherwise
// consistent, so that it is refused for the reason its name gives.
var refusedInTransport = []struct {
	name string
	pkt  []byte
	v6SA bool
}{
	{"IPv4 first fragment (MF)", v4Flags(v4(protoICMP, echo(64)), 0x2000), false},
	{"IPv4 last fragment (offset 185)", v4Flags(v4(protoICMP, echo(64)), 185), false},
	{"IPv4 middle fragment (MF, offset 185)", v4Flags(v4(protoICMP, echo(64)), 0x2000|185), false},
	{"IPv4 fragment with DF as well", v4Flags(v4(protoICMP, echo(64)), 0x4000|0x2000), false},
	{"IPv4 first fragment of a UDP datagram", func() []byte {
		d := v4(protoUDP, udp(2000)[:1480]) // UDP length says 2008
		return v4Flags(d, 0x2000)
	}(), false},
	{"IPv6 fragment header, first", v6(ipv6Fragment, frag(protoICMPv6, 0, true), echo(64)), true},
	{"IPv6 fragment header, last", v6(ipv6Fragment, frag(protoICMPv6, 185, false), echo(64)), true},
	{"IPv6 atomic fragment", v6(ipv6Fragment, frag(protoUDP, 0, false), udp(32)), true},
	{"IPv6 fragment header behind destination options", v6(ipv6DestOpts, ext(ipv6Fragment, 0), frag(protoUDP, 0, true), udp(32)), true},
	{"IPv6 hop-by-hop options", v6(ipv6HopByHop, ext(protoICMPv6, 0), echo(16)), true},
	{"IPv6 routing header", v6(ipv6Routing, ext(protoUDP, 2), udp(16)), true},
	{"IPv6 routing header behind destination options", v6(ipv6DestOpts, ext(ipv6Routing, 0), ext(protoUDP, 2), udp(16)), true},
	{"IPv6 destination options past the end", v6(ipv6DestOpts, ext(protoUDP, 3)[:24]), true},
	{"IPv6 destination options cut short", v6(ipv6DestOpts, []byte{protoUDP, 0, 1, 2}), true},
	{"IPv4 total length longer than the packet", set(v4(protoICMP, echo(64)), 2, 0, 20+8+65), false},
	{"IPv4 total length shorter than the packet", set(v4(protoICMP, echo(64)), 2, 0, 20+8+63), false},
	{"IPv4 total length shorter than the header", set(v4(protoICMP, echo(64)), 2, 0, 19), false},
	{"IPv4 IHL past the packet", set(v4(protoExp, nil), 0, 0x46), false},
	{"IPv6 payload length longer", set(v6(protoICMPv6, echo(16)), 4, 0, 25), true},
	{"IPv6 payload length 0 (jumbogram)", set(v6(protoICMPv6, echo(16)), 4, 0, 0), true},
	{"UDP length longer than the payload", set(v4(protoUDP, udp(100)), 24, 0, 109), false},
	{"UDP length shorter than the payload", set(v6(protoUDP, udp(100)), 44, 0, 107), true},
	{"UDP shorter than its header", v4(protoUDP, []byte{1, 2, 3, 4, 0, 7, 0}), false},
	{"TCP data offset past the segment", v4(protoTCP, tcp(15, 0)[:40]), false},
	{"TCP data offset under 5 words", set(v6(protoTCP, tcp(5, 10)), 40+12, 4<<4), true},
	{"TCP shorter than its header", v4(protoTCP, tcp(5, 0)[:19]), false},
	{"IPv6 packet on an IPv4 SA", v6(protoUDP, udp(16)), false},
	{"IPv4 packet on an IPv6 SA", v4(protoUDP, udp(16)), true},
}

// TestTransportSealRefuses: a transport-mode SA drops what it must not
// carry, counts it once as XfrmOutStateModeError, leaves the buffer as it
// was and spends no sequence number on it; a good packet in the same batch
// is sealed as the SA's first.
func TestTransportSealRefuses(t *testing.T) {
	for _, tt := range refusedInTransport {
		t.Run(tt.name, func(t *testing.T) {
			out, in := pair(t, ModeTransport, tt.v6SA, false, 64, suites[0].set)
			good := v4(protoUDP, udp(40))
			if tt.v6SA {
				good = v6(protoUDP, udp(40))
			}
			bad := mkPacket(tt.pkt)
			orig := bytes.Clone(bad.Buf)
			ps := []Packet{bad, mkPacket(good)}
			out.SealBatch(ps)
			if ps[0].Drop != XfrmOutStateModeError {
				t.Fatalf("Drop = %v, want XfrmOutStateModeError", ps[0].Drop)
			}
			if got := out.counters.Get(XfrmOutStateModeError); got != 1 {
				t.Errorf("XfrmOutStateModeError = %d, want 1", got)
			}
			if !bytes.Equal(ps[0].Buf, orig) || !bytes.Equal(ps[0].Data(), tt.pkt) {
				t.Errorf("the refused packet's buffer changed")
			}
			if ps[1].Drop != CounterNone {
				t.Fatalf("the good packet: Drop = %v", ps[1].Drop)
			}
			wantBytes := uint64(len(good) - hdrLenOf(good)) // the good payload only
			if st := out.Stats(); st.Seq != 1 || st.Packets != 1 || st.Bytes != wantBytes {
				t.Errorf("Stats: seq %d, packets %d, bytes %d; want 1, 1, %d", st.Seq, st.Packets, st.Bytes, wantBytes)
			}
			if p := openOne(in, ps[1]); p.Drop != CounterNone {
				t.Errorf("the good packet on open: Drop = %v", p.Drop)
			}
		})
	}
}

// hdrLenOf is the IP header length transport mode strips from d.
func hdrLenOf(d []byte) int {
	if d[0]>>4 == 4 {
		return int(d[0]&0x0f) * 4
	}
	return 40
}

// TestTunnelCarriesFragments: tunnel mode carries every datagram transport
// mode refuses, fragments first among them, byte for byte.
func TestTunnelCarriesFragments(t *testing.T) {
	for _, tt := range refusedInTransport {
		t.Run(tt.name, func(t *testing.T) {
			for _, su := range []int{0, 5} { // AES-GCM and AES-CBC: both alignments
				out, in := pair(t, ModeTunnel, tt.v6SA, true, 64, suites[su].set)
				p := openOne(in, sealOne(t, out, tt.pkt))
				if p.Drop != CounterNone || !bytes.Equal(p.Data(), tt.pkt) {
					t.Fatalf("%s: drop %v, got %x, want %x", suites[su].name, p.Drop, p.Data(), tt.pkt)
				}
			}
		})
	}
}

// TestTransportRoundTrip: what transport mode carries comes out behind a
// rebuilt header that describes a whole datagram (IPv4 id, flags and
// offset 0, lengths right), with the payload, extension headers inside
// ESP included, intact.
func TestTransportRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		pkt   []byte
		proto uint8
	}{
		{"IPv4 UDP", v4(protoUDP, udp(100)), protoUDP},
		{"IPv4 UDP, empty", v4(protoUDP, udp(0)), protoUDP},
		{"IPv4 TCP", v4(protoTCP, tcp(5, 1000)), protoTCP},
		{"IPv4 TCP with options, no data", v4(protoTCP, tcp(15, 0)), protoTCP},
		{"IPv4 ICMP", v4(protoICMP, echo(56)), protoICMP},
		{"IPv4 DF set (not a fragment)", v4Flags(v4(protoUDP, udp(100)), 0x4000), protoUDP},
		{"IPv4 empty payload", v4(protoExp, nil), protoExp},
		{"IPv6 UDP", v6(protoUDP, udp(100)), protoUDP},
		{"IPv6 TCP", v6(protoTCP, tcp(8, 500)), protoTCP},
		{"IPv6 ICMPv6", v6(protoICMPv6, echo(56)), protoICMPv6},
		{"IPv6 destination options, UDP", v6(ipv6DestOpts, ext(protoUDP, 0), udp(100)), ipv6DestOpts},
		{"IPv6 two destination options, TCP", v6(ipv6DestOpts, ext(ipv6DestOpts, 1), ext(protoTCP, 0), tcp(5, 30)), ipv6DestOpts},
		{"IPv6 destination options, no next header", v6(ipv6DestOpts, ext(protoNone, 0)), ipv6DestOpts},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is6 := tt.pkt[0]>>4 == 6
			for _, su := range suites {
				out, in := pair(t, ModeTransport, is6, su.name == "aes128gcm16", 64, su.set)
				p := openOne(in, sealOne(t, out, tt.pkt))
				if p.Drop != CounterNone {
					t.Fatalf("%s: open: Drop = %v", su.name, p.Drop)
				}
				got, hl := p.Data(), hdrLenOf(tt.pkt)
				ghl := hdrLenOf(got)
				if p.Proto != tt.proto || !bytes.Equal(got[ghl:], tt.pkt[hl:]) {
					t.Fatalf("%s: got proto %d payload %x, want %d %x", su.name, p.Proto, got[ghl:], tt.proto, tt.pkt[hl:])
				}
				if is6 {
					if got[6] != tt.proto || int(binary.BigEndian.Uint16(got[4:])) != len(got)-40 {
						t.Errorf("%s: rebuilt IPv6 header %x: want next header %d, payload length %d", su.name, got[:40], tt.proto, len(got)-40)
					}
				} else {
					if got[9] != tt.proto || int(binary.BigEndian.Uint16(got[2:])) != len(got) ||
						binary.BigEndian.Uint32(got[4:]) != 0 || !iphdr.IPv4(got).ChecksumValid() {
						t.Errorf("%s: rebuilt IPv4 header %x: want protocol %d, total length %d, id/flags/offset 0, checksum right",
							su.name, got[:20], tt.proto, len(got))
					}
				}
				// What comes out is itself a datagram transport mode carries.
				if _, _, ok := transportHeader(got); !ok {
					t.Errorf("%s: the rebuilt datagram %x would be refused by SealBatch", su.name, got)
				}
			}
		})
	}
}

// sealRaw seals payload with next header proto as a sender that skips
// SealBatch's checks would (a buggy peer that holds the key, or ipsecd
// before transport mode refused fragments).
func sealRaw(out *SA, proto uint8, payload []byte) Packet {
	p := mkPacket(payload)
	p.Proto = proto
	out.sealOne(out.t, &p, out.seq.Add(1), nil)
	return p
}

// TestTransportOpenRefuses: an authenticated transport-mode payload that
// the rebuilt header would misdescribe is dropped and counted as
// XfrmInStateModeError, never delivered; the consistent ones next to them
// pass.
func TestTransportOpenRefuses(t *testing.T) {
	tests := []struct {
		name    string
		v6      bool
		proto   uint8
		payload []byte
		want    Counter
	}{
		{"IPv4 UDP", false, protoUDP, udp(64), CounterNone},
		{"first fragment of a UDP datagram", false, protoUDP, udp(2000)[:1480], XfrmInStateModeError},
		{"not the first fragment of a UDP datagram", false, protoUDP, udp(2000)[1480:], XfrmInStateModeError},
		{"UDP length shorter", false, protoUDP, set(udp(64), 4, 0, 71), XfrmInStateModeError},
		{"UDP shorter than its header", false, protoUDP, udp(0)[:7], XfrmInStateModeError},
		{"IPv4 TCP", false, protoTCP, tcp(5, 100), CounterNone},
		{"TCP data offset past the segment", false, protoTCP, tcp(15, 0)[:40], XfrmInStateModeError},
		{"TCP shorter than its header", false, protoTCP, tcp(5, 0)[:12], XfrmInStateModeError},
		{"IPv4 ICMP", false, protoICMP, echo(8), CounterNone},
		{"IPv4 payload of 65515 bytes (total length 65535)", false, protoExp, make([]byte, 0xffff-20), CounterNone},
		{"IPv4 payload of 65516 bytes: no total length fits", false, protoExp, make([]byte, 0xffff-19), XfrmInStateModeError},
		{"IPv6 UDP", true, protoUDP, udp(64), CounterNone},
		{"IPv6 fragment header", true, ipv6Fragment, append(frag(protoUDP, 0, true), udp(64)...), XfrmInStateModeError},
		{"IPv6 fragment header behind destination options", true, ipv6DestOpts, append(ext(ipv6Fragment, 0), frag(protoUDP, 0, true)...), XfrmInStateModeError},
		{"IPv6 hop-by-hop after ESP", true, ipv6HopByHop, append(ext(protoUDP, 0), udp(8)...), XfrmInStateModeError},
		{"IPv6 routing header after ESP", true, ipv6Routing, append(ext(protoUDP, 2), udp(8)...), XfrmInStateModeError},
		{"IPv6 destination options, UDP", true, ipv6DestOpts, append(ext(protoUDP, 1), udp(8)...), CounterNone},
		{"IPv6 destination options, UDP length wrong", true, ipv6DestOpts, append(ext(protoUDP, 1), set(udp(8), 4, 0, 15)...), XfrmInStateModeError},
		{"IPv6 destination options past the end", true, ipv6DestOpts, ext(protoUDP, 4)[:16], XfrmInStateModeError},
		{"IPv6 payload of 65535 bytes", true, protoExp, make([]byte, 0xffff), CounterNone},
		{"IPv6 payload of 65536 bytes: no payload length fits", true, protoExp, make([]byte, 0x10000), XfrmInStateModeError},
		{"IPv4 protocol 44 is no IPv6 header", false, ipv6Fragment, frag(protoUDP, 0, true), CounterNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, in := pair(t, ModeTransport, tt.v6, false, 64, suites[0].set)
			p := openOne(in, sealRaw(out, tt.proto, tt.payload))
			if p.Drop != tt.want {
				t.Fatalf("Drop = %v, want %v", p.Drop, tt.want)
			}
			wantCount := uint64(0)
			if tt.want == XfrmInStateModeError {
				wantCount = 1
			}
			if got := in.counters.Get(XfrmInStateModeError); got != wantCount {
				t.Errorf("XfrmInStateModeError = %d, want %d", got, wantCount)
			}
			if tt.want != CounterNone {
				return
			}
			got := p.Data()
			if hl := hdrLenOf(got); p.Proto != tt.proto || !bytes.Equal(got[hl:], tt.payload) {
				t.Errorf("got proto %d, payload of %d bytes; want %d, %d bytes", p.Proto, len(got)-hl, tt.proto, len(tt.payload))
			}
		})
	}
}
