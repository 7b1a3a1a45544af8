package iphdr

import "testing"

// FuzzReaders feeds the readers arbitrary bytes, as an inner packet that
// authenticated or a raw socket's datagram may be: IsValid is the only
// check a caller makes, so after it every accessor must stay in bounds,
// and a skipped extension header must leave a suffix of what it was given.
func FuzzReaders(f *testing.F) {
	f.Add(v4(5, ProtocolTCP, tcp(5, 8)), uint8(IPv6DestOpts))
	f.Add(v4(15, ProtocolUDP, nil), uint8(IPv6Fragment))
	f.Add(v6(IPv6DestOpts, append(ext(ProtocolTCP, 1), tcp(6, 3)...)), uint8(IPv6HopByHop))
	f.Add([]byte{0x4f, 0, 0, 20}, uint8(IPv6Routing))
	f.Fuzz(func(t *testing.T, b []byte, proto uint8) {
		switch Version(b) {
		case 4:
			if h := IPv4(b); h.IsValid() {
				if hl := h.HeaderLen(); hl < IPv4MinLen || hl > IPv4MaxLen || len(h.Payload()) != len(b)-hl {
					t.Fatalf("HeaderLen %d, payload %d of %d bytes", hl, len(h.Payload()), len(b))
				}
				_, _, _, _, _ = h.TotalLen(), h.ID(), h.IsFragment(), h.Protocol(), h.ChecksumValid()
				_, _, _ = h.Src(), h.Dst(), h.Addrs()
			}
		case 6:
			if h := IPv6(b); h.IsValid() {
				_, _, _, _, _ = h.PayloadLen(), h.NextHeader(), h.Src(), h.Dst(), h.Addrs()
				if len(h.Payload()) != len(b)-IPv6Len {
					t.Fatalf("payload %d of %d bytes", len(h.Payload()), len(b))
				}
			}
		}
		if _, rest, ok := SkipExtension(proto, b); ok {
			if len(rest) > len(b)-IPv6ExtMinLen || (len(rest) > 0 && &rest[len(rest)-1] != &b[len(b)-1]) {
				t.Fatalf("SkipExtension(%d, %d bytes) left %d bytes, not a suffix", proto, len(b), len(rest))
			}
		}
		if _, _, ok := Ports(b); ok != (len(b) >= 4) {
			t.Fatalf("Ports of %d bytes: ok %v", len(b), ok)
		}
		if s := TCP(b); s.IsValid() {
			if hl := s.HeaderLen(); hl < TCPMinLen || hl > len(b) {
				t.Fatalf("TCP HeaderLen %d of %d bytes", hl, len(b))
			}
			_, _ = s.Seq(), s.Flags()
		}
		if u := UDP(b); u.IsValid() {
			_ = u.Length()
		}
	})
}
