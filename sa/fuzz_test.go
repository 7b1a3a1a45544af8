package sa

import (
	"bytes"
	"testing"
)

// FuzzSADOpenBatch feeds arbitrary bytes from "the network" to the SAD: it
// must not panic, and must drop or accept each packet exactly once.
func FuzzSADOpenBatch(f *testing.F) {
	f.Add(rfc7634ESP)
	f.Add(linuxGCM)
	f.Add(scapyCBC)
	f.Add(scapyGCMESN)
	f.Add([]byte{0, 0, 0x10, 1})
	f.Add([]byte{})
	d := NewSAD(nil)
	var states []*SA
	for _, su := range suites {
		_, in := pair(f, ModeTransport, false, true, 64, su.set)
		in.cfg.SPI = 0x1001 + uint32(len(states))
		states = append(states, in)
	}
	for _, set := range []func(*Config){cbcAlgs, func(c *Config) { c.AEAD = gcmLinuxAlg() }} {
		_, in := pair(f, ModeTunnel, false, false, 64, set)
		in.cfg.SPI = 0x222 + uint32(len(states))
		states = append(states, in)
	}
	rfc := func() *SA {
		s, _ := New(Config{Src: outer4a, Dst: outer4b, SPI: 0x01020304, Dir: DirIn, Mode: ModeTunnel, ReplayWindow: 32,
			AEAD: &Algorithm{Name: AlgChaCha, Key: rfc7634Key}}, nil)
		return s
	}()
	states = append(states, rfc)
	if err := d.Replace(states, nil); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ps := []Packet{mkPacket(b), mkPacket(b), mkPacket(make([]byte, len(b)))}
		ps[1].Off, ps[1].Len = 0, len(ps[1].Buf) // garbage around it too
		ps[2].Src = bytes.Clone(b)               // opened from another buffer
		d.OpenBatch(ps)
		for _, p := range ps {
			if p.Drop == CounterNone && (p.Off < 0 || p.Off+p.Len > len(p.Buf)) {
				t.Fatalf("accepted packet out of bounds: off %d len %d cap %d", p.Off, p.Len, len(p.Buf))
			}
		}
	})
}

// FuzzSealOpen: any cleartext either is refused by SealBatch or comes back
// from OpenBatch: whole in tunnel mode; in transport mode as its payload
// behind a rebuilt header that makes a datagram SealBatch would take again.
// which picks the suite (low bits), outer IPv6 (0x20), ESN (0x40) and
// transport mode (0x80).
func FuzzSealOpen(f *testing.F) {
	f.Add(rfc7634Inner, uint8(0))
	f.Add(scapyInner, uint8(5))
	f.Add([]byte{0x60}, uint8(3))
	f.Add(v4(protoUDP, udp(30)), uint8(0x81))
	f.Add(v4Flags(v4(protoICMP, echo(30)), 0x2000), uint8(0x82))
	f.Add(v6(ipv6DestOpts, ext(protoTCP, 0), tcp(6, 9)), uint8(0xa4))
	f.Add(v6(ipv6Fragment, frag(protoUDP, 0, true), udp(9)), uint8(0xa6))
	// The HMACs of suites 8 to 11: sha1, sha384, sha512, NULL with sha1.
	f.Add(scapyInner, uint8(8))
	f.Add(v4(protoUDP, udp(30)), uint8(0xc9))
	f.Add(v6(ipv6DestOpts, ext(protoTCP, 0), tcp(6, 9)), uint8(0xaa))
	f.Add(v4(protoICMP, echo(30)), uint8(0x4b))
	f.Fuzz(func(t *testing.T, b []byte, which uint8) {
		su := suites[int(which)%len(suites)]
		mode := ModeTunnel
		if which&0x80 != 0 {
			mode = ModeTransport
		}
		out, in := pair(t, mode, which&0x20 != 0, which&0x40 != 0, 64, su.set)
		ps := []Packet{mkPacket(b)}
		out.SealBatch(ps)
		if ps[0].Drop != CounterNone {
			if ps[0].Drop != XfrmOutStateModeError {
				t.Fatalf("seal: Drop = %v, want CounterNone or XfrmOutStateModeError", ps[0].Drop)
			}
			return
		}
		p := openOne(in, ps[0])
		if p.Drop != CounterNone {
			if p.Drop == XfrmInStateModeError && mode == ModeTunnel {
				return // a truncated inner packet, e.g. version 6 in 40 bytes of junk, is fine
			}
			if p.Drop == DroppedDummy && mode == ModeTransport {
				return // protocol 59 became next header 59: a dummy to the receiver (testdata seed)
			}
			t.Fatalf("sealed packet dropped on open: %v", p.Drop)
		}
		got := p.Data()
		if mode == ModeTunnel {
			if !bytes.Equal(got, b) {
				t.Fatalf("tunnel: got %x, want %x", got, b)
			}
			return
		}
		hl, _, _ := transportHeader(b)
		ghl, _, ok := transportHeader(got)
		if !ok || !bytes.Equal(got[ghl:], b[hl:]) {
			t.Fatalf("transport: got %x (a datagram SealBatch takes: %v), want payload %x", got, ok, b[hl:])
		}
	})
}

// FuzzTSSelector feeds arbitrary inner packets to the traffic selector
// checks (the inbound one reads what an authenticated peer decrypted to;
// the outbound one what the interface read): they must not panic, and a
// list of one prefix each side of any protocol and port must decide as
// the prefix pair does.
func FuzzTSSelector(f *testing.F) {
	f.Add(ipv4Packet(8))
	f.Add(ipv6Packet(8))
	f.Add(v6(ipv6DestOpts, ext(protoTCP, 1), tcp(5, 16)))
	f.Add(v6(ipv6Fragment, frag(protoTCP, 0, true), tcp(5, 16)))
	f.Add(v4Flags(v4(protoUDP, udp(8)), 0x2000))
	f.Add([]byte{0x45})
	f.Add([]byte{0x60, 0, 0, 0, 0, 0, 0, 0})
	pairSel := sel("192.0.2.0/24", "203.0.113.0/25")
	asList := Selector{TS: &TSSet{Src: []TS{anyTS("192.0.2.0/24")}, Dst: []TS{anyTS("203.0.113.0/25")}}}
	ports, err := NewSelector([]TS{ts("192.0.2.0/24", protoTCP, 443, 443), anyTS("2001:db8:1::/48")},
		[]TS{ts("203.0.113.0/24", protoUDP, 1, 1023), ts("2001:db8:2::/48", protoICMPv6, 0x8000, 0x80ff), ts("2001:db8:2::/48", 0, 80, 80)})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ports.admitsPacket(b)
		ports.admitsTransport(outer6a, outer6b, protoTCP, b)
		if got, want := asList.admitsPacket(b), pairSel.admitsPacket(b); got != want {
			t.Fatalf("one prefix each side as a list admits %v, the prefix pair %v", got, want)
		}
	})
}
