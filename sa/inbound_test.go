package sa

import (
	"net/netip"
	"testing"
)

// inWith returns an inbound SA like out's peer but with sel as its
// selector and encap as its encapsulation: the peer (out) seals whatever
// it likes under a valid SA, as a spoofing peer would.
func inWith(t testing.TB, out *SA, sel Selector, encap *Encap) *SA {
	t.Helper()
	c := out.Config()
	c.Dir, c.Selector, c.Encap = DirIn, sel, encap
	in, err := New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// TestInboundSelector: an inbound SA's selector is applied to the inner
// packet after decryption (RFC 4301 §5.2; Linux's __xfrm_policy_check),
// in tunnel mode to the carried packet's addresses and in transport mode
// to the rebuilt header's (the SA's outer ones). A packet outside it is
// dropped as XfrmInStateMismatch; the window still advanced, as in Linux,
// where the check comes after xfrm_input.
func TestInboundSelector(t *testing.T) {
	// ipv4Packet: 192.0.2.1 -> 203.0.113.1; ipv6Packet: 2001:db8:1::1 ->
	// 2001:db8:2::1; transport: outer4a -> outer4b, outer6a -> outer6b.
	tests := []struct {
		name string
		mode Mode
		v6   bool
		sel  Selector
		want Counter
	}{
		{"tunnel v4 no selector", ModeTunnel, false, Selector{}, CounterNone},
		{"tunnel v4 src and dst match", ModeTunnel, false, Selector{Src: pfx("192.0.2.0/24"), Dst: pfx("203.0.113.0/24")}, CounterNone},
		{"tunnel v4 src only, match", ModeTunnel, false, Selector{Src: pfx("192.0.2.1/32")}, CounterNone},
		{"tunnel v4 spoofed src", ModeTunnel, false, Selector{Src: pfx("192.0.2.128/25")}, XfrmInStateMismatch},
		{"tunnel v4 dst outside", ModeTunnel, false, Selector{Src: pfx("192.0.2.0/24"), Dst: pfx("203.0.113.128/25")}, XfrmInStateMismatch},
		{"tunnel v4 packet, v6 selector", ModeTunnel, false, Selector{Src: pfx("2001:db8:1::/48")}, XfrmInStateMismatch},
		{"tunnel v6 match", ModeTunnel, true, Selector{Src: pfx("2001:db8:1::/48"), Dst: pfx("2001:db8:2::/48")}, CounterNone},
		{"tunnel v6 spoofed src", ModeTunnel, true, Selector{Src: pfx("2001:db8:3::/48")}, XfrmInStateMismatch},
		{"tunnel v6 dst outside", ModeTunnel, true, Selector{Dst: pfx("2001:db8:3::/48")}, XfrmInStateMismatch},
		{"tunnel v6 packet, v4 selector", ModeTunnel, true, Selector{Dst: pfx("0.0.0.0/0")}, XfrmInStateMismatch},
		{"transport v4 match", ModeTransport, false, Selector{Src: pfx("198.51.100.1/32"), Dst: pfx("198.51.100.2/32")}, CounterNone},
		{"transport v4 outer src outside", ModeTransport, false, Selector{Src: pfx("10.0.0.0/8")}, XfrmInStateMismatch},
		{"transport v4 outer dst outside", ModeTransport, false, Selector{Dst: pfx("198.51.100.1/32")}, XfrmInStateMismatch},
		{"transport v6 match", ModeTransport, true, Selector{Src: pfx("2001:db8::1/128")}, CounterNone},
		{"transport v6 outer src outside", ModeTransport, true, Selector{Src: pfx("2001:db8::2/128")}, XfrmInStateMismatch},
		{"transport v6 no selector", ModeTransport, true, Selector{}, CounterNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _ := pair(t, tt.mode, tt.v6, true, 64, suites[0].set)
			in := inWith(t, out, tt.sel, nil)
			var pkt []byte
			switch {
			case tt.mode == ModeTransport && tt.v6:
				pkt = v6(protoUDP, udp(100))
			case tt.mode == ModeTransport:
				pkt = v4(protoUDP, udp(100))
			case tt.v6:
				pkt = ipv6Packet(100)
			default:
				pkt = ipv4Packet(100)
			}
			p := openOne(in, sealOne(t, out, pkt))
			if p.Drop != tt.want {
				t.Fatalf("Drop = %v, want %v", p.Drop, tt.want)
			}
			wantCount := uint64(0)
			if tt.want == XfrmInStateMismatch {
				wantCount = 1
			}
			if got := in.counters.Get(XfrmInStateMismatch); got != wantCount {
				t.Errorf("XfrmInStateMismatch = %d, want %d", got, wantCount)
			}
			// Either way the packet authenticated: the window moved
			// and the SA counted it, as Linux's xfrm_input does
			// before the policy check.
			if st := in.Stats(); st.Seq != 1 || st.Packets != 1 {
				t.Errorf("after one packet: Seq %d, Packets %d; want 1, 1", st.Seq, st.Packets)
			}
		})
	}
}

// TestEncapMismatch: a packet that arrives in another encapsulation than
// its SA's is dropped before the window is looked at (Linux's xfrm_input:
// encap_type against x->encap, XfrmInStateMismatch), so the same packet
// in the right encapsulation still passes afterwards.
func TestEncapMismatch(t *testing.T) {
	udpEncap := &Encap{SrcPort: 4500, DstPort: 4500}
	tests := []struct {
		name    string
		encap   *Encap
		arrival bool // Packet.UDP
		want    Counter
	}{
		{"raw SA, raw ESP", nil, false, CounterNone},
		{"raw SA, ESP in UDP", nil, true, XfrmInStateMismatch},
		{"UDP SA, ESP in UDP", udpEncap, true, CounterNone},
		{"UDP SA, raw ESP", udpEncap, false, XfrmInStateMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _ := pair(t, ModeTunnel, false, true, 64, suites[0].set)
			in := inWith(t, out, Selector{}, tt.encap)
			e := sealOne(t, out, ipv4Packet(100))
			ps := []Packet{reseat(e)}
			ps[0].UDP = tt.arrival
			in.OpenBatch(ps)
			if ps[0].Drop != tt.want {
				t.Fatalf("Drop = %v, want %v", ps[0].Drop, tt.want)
			}
			if tt.want == CounterNone {
				return
			}
			if got := in.counters.Get(XfrmInStateMismatch); got != 1 {
				t.Errorf("XfrmInStateMismatch = %d, want 1", got)
			}
			if st := in.Stats(); st.Seq != 0 || st.Packets != 0 || st.IntegrityFailed != 0 {
				t.Errorf("after a mismatch: Seq %d, Packets %d, IntegrityFailed %d; want all 0", st.Seq, st.Packets, st.IntegrityFailed)
			}
			ps = []Packet{reseat(e)}
			ps[0].UDP = !tt.arrival
			in.OpenBatch(ps)
			if ps[0].Drop != CounterNone {
				t.Errorf("the same packet in the SA's encapsulation: Drop = %v, want none", ps[0].Drop)
			}
		})
	}
}

// TestInboundSelectorAllocs: the selector check allocates nothing, in
// either family.
func TestInboundSelectorAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, v6 := range []bool{false, true} {
		out, _ := pair(t, ModeTunnel, v6, true, 0, suites[0].set)
		sel := Selector{Src: pfx("192.0.2.0/24"), Dst: pfx("203.0.113.0/24")}
		pkt := ipv4Packet(1372)
		if v6 {
			sel = Selector{Src: pfx("2001:db8:1::/48"), Dst: pfx("2001:db8:2::/48")}
			pkt = ipv6Packet(1352)
		}
		in := inWith(t, out, sel, nil)
		e := sealOne(t, out, pkt)
		wire := e.Data()
		ps := []Packet{mkPacket(wire)}
		allocs := testing.AllocsPerRun(50, func() {
			copy(ps[0].Buf[Headroom:], wire)
			ps[0].Off, ps[0].Len = Headroom, len(wire)
			in.OpenBatch(ps)
			if ps[0].Drop != CounterNone {
				t.Fatalf("open: %v", ps[0].Drop)
			}
		})
		if allocs != 0 {
			t.Errorf("v6 %v: OpenBatch with a selector: %v allocations, want 0", v6, allocs)
		}
	}
}
