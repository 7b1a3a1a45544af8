package sa

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"

	"github.com/ipsecd/ipsecd/internal/iphdr"
)

// at is pkt (an IPv4 or IPv6 packet) from src to dst.
func at(pkt []byte, src, dst string) []byte {
	p := append([]byte(nil), pkt...)
	if iphdr.Version(p) == 4 {
		copy(p[12:], netip.MustParseAddr(src).AsSlice())
		copy(p[16:], netip.MustParseAddr(dst).AsSlice())
		iphdr.IPv4(p).UpdateChecksum()
		return p
	}
	copy(p[8:], netip.MustParseAddr(src).AsSlice())
	copy(p[24:], netip.MustParseAddr(dst).AsSlice())
	return p
}

// icmp is an ICMP (or ICMPv6) message of type typ and code 0.
func icmp(typ byte) []byte { return []byte{typ, 0, 0, 0, 0, 1, 0, 1} }

// ts is the traffic selector of prefix p with protocol proto and ports
// lo-hi.
func ts(p string, proto uint8, lo, hi uint16) TS {
	t := PrefixTS(netip.MustParsePrefix(p))
	t.Proto, t.StartPort, t.EndPort = proto, lo, hi
	return t
}

// tsRange is the traffic selector of the addresses from to to.
func tsRange(from, to string) TS {
	return TS{Start: netip.MustParseAddr(from), End: netip.MustParseAddr(to), EndPort: 0xffff}
}

func anyTS(p string) TS { return PrefixTS(netip.MustParsePrefix(p)) }

// TestTSSelector: an SA whose selector is traffic selector lists admits
// (inbound, after decryption) and is looked up for (outbound) exactly the
// packets from one of its sources to one of its destinations, each with
// its protocol and ports: ranges and prefixes of both families, ICMP's
// type and code as its port, IPv6 extension headers walked, fragments
// (whose ports are not read) only where no port range is asked.
func TestTSSelector(t *testing.T) {
	halves := []TS{anyTS("10.1.0.0/25"), anyTS("10.1.0.128/25")}
	net2 := []TS{anyTS("10.2.0.0/24")}
	v4udp := at(v4(protoUDP, udp(16)), "10.1.0.7", "10.2.0.1")    // ports 4500 -> 4501
	v4tcp := at(v4(protoTCP, tcp(5, 16)), "10.1.0.7", "10.2.0.1") // ports 443 -> 50000
	v6tcp := at(v6(protoTCP, tcp(5, 16)), "2001:db8:1::7", "2001:db8:2::1")
	tests := []struct {
		name     string
		src, dst []TS
		pkt      []byte
		want     bool
	}{
		{"halves: lower", halves, net2, v4udp, true},
		{"halves: upper", halves, net2, at(v4udp, "10.1.0.200", "10.2.0.1"), true},
		{"halves: a third source", halves, net2, at(v4udp, "10.9.9.9", "10.2.0.1"), false},
		{"halves: source from the destination's side", halves, net2, at(v4udp, "10.2.0.9", "10.2.0.1"), false},
		{"halves: destination outside", halves, net2, at(v4udp, "10.1.0.7", "10.3.0.1"), false},
		{"halves: IPv6 packet", halves, net2, v6tcp, false},

		{"range: first", []TS{tsRange("10.1.0.5", "10.1.0.9")}, net2, at(v4udp, "10.1.0.5", "10.2.0.1"), true},
		{"range: last", []TS{tsRange("10.1.0.5", "10.1.0.9")}, net2, at(v4udp, "10.1.0.9", "10.2.0.1"), true},
		{"range: before", []TS{tsRange("10.1.0.5", "10.1.0.9")}, net2, at(v4udp, "10.1.0.4", "10.2.0.1"), false},
		{"range: after", []TS{tsRange("10.1.0.5", "10.1.0.9")}, net2, at(v4udp, "10.1.0.10", "10.2.0.1"), false},

		{"tcp source port 443", []TS{ts("10.1.0.0/24", protoTCP, 443, 443)}, net2, v4tcp, true},
		{"tcp source port 443: udp", []TS{ts("10.1.0.0/24", protoTCP, 443, 443)}, net2, v4udp, false},
		{"tcp source port 80", []TS{ts("10.1.0.0/24", protoTCP, 80, 80)}, net2, v4tcp, false},
		{"udp destination ports 4500-4501", []TS{ts("10.1.0.0/24", protoUDP, 0, 0xffff)}, []TS{ts("10.2.0.0/24", protoUDP, 4500, 4501)}, v4udp, true},
		{"udp destination ports 4502-5000", []TS{ts("10.1.0.0/24", protoUDP, 0, 0xffff)}, []TS{ts("10.2.0.0/24", protoUDP, 4502, 5000)}, v4udp, false},
		{"udp port range: first fragment", []TS{anyTS("10.1.0.0/24")}, []TS{ts("10.2.0.0/24", protoUDP, 4500, 4501)}, v4Flags(v4udp, 0x2000), false},
		{"udp port range: later fragment", []TS{anyTS("10.1.0.0/24")}, []TS{ts("10.2.0.0/24", protoUDP, 4500, 4501)}, v4Flags(v4udp, 0x0004), false},
		{"udp any port: later fragment", []TS{anyTS("10.1.0.0/24")}, []TS{ts("10.2.0.0/24", protoUDP, 0, 0xffff)}, v4Flags(v4udp, 0x0004), true},
		{"udp any port: tcp", []TS{anyTS("10.1.0.0/24")}, []TS{ts("10.2.0.0/24", protoUDP, 0, 0xffff)}, v4tcp, false},
		{"port range, protocol any: udp", []TS{anyTS("10.1.0.0/24")}, []TS{ts("10.2.0.0/24", 0, 4501, 4501)}, v4udp, true},
		{"port range, protocol any: no ports", []TS{anyTS("10.1.0.0/24")}, []TS{ts("10.2.0.0/24", 0, 4501, 4501)}, at(v4(protoExp, make([]byte, 8)), "10.1.0.7", "10.2.0.1"), false},
		{"truncated udp header", []TS{anyTS("10.1.0.0/24")}, []TS{ts("10.2.0.0/24", protoUDP, 4500, 4501)}, at(v4(protoUDP, []byte{0x11}), "10.1.0.7", "10.2.0.1"), false},

		{"icmp echo request", []TS{ts("10.1.0.0/24", protoICMP, 0x0800, 0x08ff)}, net2, at(v4(protoICMP, icmp(8)), "10.1.0.7", "10.2.0.1"), true},
		{"icmp echo reply", []TS{ts("10.1.0.0/24", protoICMP, 0x0800, 0x08ff)}, net2, at(v4(protoICMP, icmp(0)), "10.1.0.7", "10.2.0.1"), false},
		{"icmpv6 echo request", []TS{ts("2001:db8:1::/48", protoICMPv6, 0x8000, 0x80ff)}, []TS{anyTS("2001:db8:2::/48")},
			at(v6(protoICMPv6, icmp(128)), "2001:db8:1::7", "2001:db8:2::1"), true},

		{"v6 tcp 443", []TS{ts("2001:db8:1::/48", protoTCP, 443, 443)}, []TS{anyTS("2001:db8:2::/48")}, v6tcp, true},
		{"v6 tcp 443 behind destination options", []TS{ts("2001:db8:1::/48", protoTCP, 443, 443)}, []TS{anyTS("2001:db8:2::/48")},
			at(v6(ipv6DestOpts, ext(protoTCP, 1), tcp(5, 16)), "2001:db8:1::7", "2001:db8:2::1"), true},
		{"v6 tcp 443 in a first fragment", []TS{ts("2001:db8:1::/48", protoTCP, 443, 443)}, []TS{anyTS("2001:db8:2::/48")},
			at(v6(ipv6Fragment, frag(protoTCP, 0, true), tcp(5, 16)), "2001:db8:1::7", "2001:db8:2::1"), false},
		{"v6 tcp any port in a later fragment", []TS{ts("2001:db8:1::/48", protoTCP, 0, 0xffff)}, []TS{anyTS("2001:db8:2::/48")},
			at(v6(ipv6Fragment, frag(protoTCP, 8, false), make([]byte, 16)), "2001:db8:1::7", "2001:db8:2::1"), true},
		{"v6 truncated extension header", []TS{ts("2001:db8:1::/48", protoTCP, 0, 0xffff)}, []TS{anyTS("2001:db8:2::/48")},
			at(v6(ipv6DestOpts, []byte{protoTCP, 4, 0, 0}), "2001:db8:1::7", "2001:db8:2::1"), false},

		{"v4 and v6: v4", []TS{anyTS("10.1.0.0/24"), anyTS("2001:db8:1::/48")}, []TS{anyTS("10.2.0.0/24"), anyTS("2001:db8:2::/48")}, v4udp, true},
		{"v4 and v6: v6", []TS{anyTS("10.1.0.0/24"), anyTS("2001:db8:1::/48")}, []TS{anyTS("10.2.0.0/24"), anyTS("2001:db8:2::/48")}, v6tcp, true},
		{"v4 and v6: v6 outside", []TS{anyTS("10.1.0.0/24"), anyTS("2001:db8:1::/48")}, []TS{anyTS("10.2.0.0/24"), anyTS("2001:db8:2::/48")},
			at(v6tcp, "2001:db8:1::7", "2001:db8:3::1"), false},
		{"families apart: v4", []TS{anyTS("10.1.0.0/24")}, []TS{anyTS("2001:db8:2::/48")}, v4udp, false},
		{"families apart: v6", []TS{anyTS("10.1.0.0/24")}, []TS{anyTS("2001:db8:2::/48")}, v6tcp, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel, err := NewSelector(tt.src, tt.dst)
			if err != nil {
				t.Fatal(err)
			}
			if sel.TS == nil {
				t.Fatalf("NewSelector gave the prefix pair %v; the test is of lists", sel)
			}
			// Inbound: a peer seals it under an SA without selector.
			out, _ := pair(t, ModeTunnel, iphdr.Version(tt.pkt) == 6, true, 64, suites[0].set)
			in := inWith(t, out, sel, nil)
			got := openOne(in, sealOne(t, out, tt.pkt))
			want := map[bool]Counter{true: CounterNone, false: XfrmInStateMismatch}[tt.want]
			if got.Drop != want {
				t.Errorf("inbound: %v, want %v", got.Drop, want)
			}
			// Outbound: the SA is found for it, or none is.
			d := NewSAD(nil)
			s := newOut(t, 0x100, 1, sel)
			if err := d.Add(s); err != nil {
				t.Fatal(err)
			}
			wantSA, wantC := map[bool]*SA{true: s}[tt.want], map[bool]Counter{true: CounterNone, false: XfrmOutNoStates}[tt.want]
			if gotSA, c := d.LookupOut(1, tt.pkt); gotSA != wantSA || c != wantC {
				t.Errorf("LookupOut = %v, %v; want %v, %v", gotSA, c, wantSA, wantC)
			}
		})
	}
}

// TestTSSelectorTransport: in transport mode the addresses are the SA's
// outer ones (the rebuilt header's), and a TSSet's protocol and ports are
// the payload's, inbound and outbound.
func TestTSSelectorTransport(t *testing.T) {
	https := []TS{ts("198.51.100.1/32", protoTCP, 443, 443)}
	peer := []TS{anyTS("198.51.100.2/32")}
	for _, tt := range []struct {
		name string
		pkt  []byte
		want bool
	}{
		{"tcp from 443", v4(protoTCP, tcp(5, 16)), true},
		{"udp", v4(protoUDP, udp(16)), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sel, err := NewSelector(https, peer)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := pair(t, ModeTransport, false, true, 64, suites[0].set)
			in := inWith(t, out, sel, nil)
			got := openOne(in, sealOne(t, out, tt.pkt))
			if want := map[bool]Counter{true: CounterNone, false: XfrmInStateMismatch}[tt.want]; got.Drop != want {
				t.Errorf("inbound: %v, want %v", got.Drop, want)
			}
			c := out.Config()
			c.Selector = sel
			s, err := New(c, nil)
			if err != nil {
				t.Fatal(err)
			}
			d := NewSAD(nil)
			if err := d.Add(s); err != nil {
				t.Fatal(err)
			}
			if got, _ := d.LookupOut(1, tt.pkt); (got == s) != tt.want {
				t.Errorf("LookupOut = %v, want the SA %v", got, tt.want)
			}
		})
	}
}

// TestTSLookupPrefixes: an SA with a TSSet is found under every prefix of
// its destination ranges, by the longest-prefix rule among the others,
// and one that does not hold the packet (source, protocol, ports) leaves
// it to the next.
func TestTSLookupPrefixes(t *testing.T) {
	d := NewSAD(nil)
	wide := newOut(t, 0x100, 1, sel("", "10.2.0.0/24"))
	// 10.2.0.5-10.2.0.9 is 10.2.0.5/32, 10.2.0.6/31, 10.2.0.8/31.
	rangeSel, err := NewSelector([]TS{anyTS("10.1.0.0/24")}, []TS{tsRange("10.2.0.5", "10.2.0.9")})
	if err != nil {
		t.Fatal(err)
	}
	narrow := newOut(t, 0x101, 1, rangeSel)
	udpSel, err := NewSelector([]TS{anyTS("10.1.0.0/24")}, []TS{ts("10.2.0.128/25", protoUDP, 4501, 4501)})
	if err != nil {
		t.Fatal(err)
	}
	udpOnly := newOut(t, 0x102, 1, udpSel)
	for _, s := range []*SA{wide, narrow, udpOnly} {
		if err := d.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	v4udp := v4(protoUDP, udp(16))
	for _, tt := range []struct {
		src, dst string
		pkt      []byte
		want     *SA
	}{
		{"10.1.0.1", "10.2.0.4", v4udp, wide},
		{"10.1.0.1", "10.2.0.5", v4udp, narrow},
		{"10.1.0.1", "10.2.0.7", v4udp, narrow},
		{"10.1.0.1", "10.2.0.9", v4udp, narrow},
		{"10.1.0.1", "10.2.0.10", v4udp, wide},
		{"10.9.0.1", "10.2.0.7", v4udp, wide}, // not from the range's sources
		{"10.1.0.1", "10.2.0.200", v4udp, udpOnly},
		{"10.1.0.1", "10.2.0.200", v4(protoTCP, tcp(5, 16)), wide}, // not udp
	} {
		if got, _ := d.LookupOut(1, at(tt.pkt, tt.src, tt.dst)); got != tt.want {
			t.Errorf("LookupOut %s -> %s: %v, want %v", tt.src, tt.dst, got, tt.want)
		}
	}
	// Gone with its SA.
	if err := d.Delete(DirOut, 0x101, netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.LookupOut(1, at(v4udp, "10.1.0.1", "10.2.0.7")); got != wide {
		t.Errorf("after the delete: %v, want %v", got, wide)
	}
}

// TestNewSelector: a prefix pair when each side is one prefix of any
// protocol and port (as a static state's, compared with ==); lists
// otherwise, kept apart from the caller's; what a selector cannot hold
// exactly is refused with the field named. Check and CheckPolicy apply
// the same rules.
func TestNewSelector(t *testing.T) {
	s, err := NewSelector([]TS{anyTS("10.1.0.0/24")}, []TS{anyTS("10.2.0.0/24")})
	if err != nil || s != sel("10.1.0.0/24", "10.2.0.0/24") {
		t.Errorf("one prefix each: %v, %v; want the prefix pair", s, err)
	}
	src := []TS{anyTS("10.1.0.0/25"), anyTS("10.1.0.128/25")}
	s, err = NewSelector(src, []TS{anyTS("10.2.0.0/24")})
	if err != nil || s.TS == nil || s.String() != "src 10.1.0.0/25,10.1.0.128/25 dst 10.2.0.0/24" {
		t.Fatalf("two halves: %v, %v", s, err)
	}
	src[0] = anyTS("0.0.0.0/0")
	if s.TS.Src[0] != anyTS("10.1.0.0/25") {
		t.Errorf("the selector shares the caller's list")
	}
	if r := s.Reverse(); r.String() != "src 10.2.0.0/24 dst 10.1.0.0/25,10.1.0.128/25" {
		t.Errorf("Reverse: %v", r)
	}
	for _, tt := range []struct {
		name     string
		src, dst []TS
		field    string
	}{
		{"empty source", nil, []TS{anyTS("10.2.0.0/24")}, "src_ts"},
		{"empty destination", []TS{anyTS("10.2.0.0/24")}, nil, "dst_ts"},
		{"reversed range", []TS{tsRange("10.1.0.9", "10.1.0.5")}, []TS{anyTS("10.2.0.0/24")}, "src_ts[0]"},
		{"two families", []TS{anyTS("10.1.0.0/24"), tsRange("10.1.0.1", "2001:db8::1")}, []TS{anyTS("10.2.0.0/24")}, "src_ts[1]"},
		{"opaque ports", []TS{anyTS("10.1.0.0/24")}, []TS{ts("10.2.0.0/24", protoTCP, 0xffff, 0)}, "dst_ts[0]"},
		{"no address", []TS{{EndPort: 0xffff}}, []TS{anyTS("10.2.0.0/24")}, "src_ts[0]"},
		{"too many", make([]TS, MaxTS+1), []TS{anyTS("10.2.0.0/24")}, "src_ts"},
		{"too many prefixes", []TS{anyTS("10.1.0.0/24")}, manyRanges(MaxTSPrefixes/254 + 1), "dst_ts"},
	} {
		_, err := NewSelector(tt.src, tt.dst)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tt.field {
			t.Errorf("%s: %v, want an error naming %s", tt.name, err, tt.field)
		}
	}
	c := Config{Src: outer4a, Dst: outer4b, SPI: 0x1000, Dir: DirIn, Mode: ModeTunnel, IfID: 1, AEAD: &Algorithm{Name: AlgGCM, Key: seqKey(20, 0)},
		Selector: Selector{Src: pfx("10.0.0.0/8"), TS: &TSSet{Src: []TS{tsRange("10.1.0.9", "10.1.0.5")}, Dst: []TS{anyTS("10.2.0.0/24")}}}}
	var fe FieldErrors
	if err := Check(&c); !errors.As(err, &fe) || len(fe) != 2 || fe[0].Field != "selector.src" || fe[1].Field != "selector.src_ts[0]" {
		t.Errorf("Check: %v; want selector.src (beside lists) and selector.src_ts[0]", err)
	}
	p := Policy{Dir: DirOut, IfID: 1, Action: ActionAllow, Selector: s}
	if err := CheckPolicy(&p); err == nil {
		t.Errorf("CheckPolicy took a policy with traffic selector lists")
	}
}

// TestTSString: traffic selectors are written as swanctl writes them.
func TestTSString(t *testing.T) {
	for _, tt := range []struct {
		ts   TS
		want string
	}{
		{anyTS("10.1.0.0/24"), "10.1.0.0/24"},
		{anyTS("2001:db8::/32"), "2001:db8::/32"},
		{tsRange("10.1.0.5", "10.1.0.9"), "10.1.0.5-10.1.0.9"},
		{ts("10.1.0.0/24", protoTCP, 80, 80), "10.1.0.0/24[tcp/80]"},
		{ts("10.1.0.0/24", protoUDP, 1000, 2000), "10.1.0.0/24[udp/1000-2000]"},
		{ts("10.1.0.0/24", 47, 0, 0xffff), "10.1.0.0/24[47]"},
		{ts("10.1.0.0/24", 0, 53, 53), "10.1.0.0/24[any/53]"},
	} {
		if got := tt.ts.String(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.ts, got, tt.want)
		}
	}
}

// TestEachPrefix: a range is split into the fewest prefixes that are
// exactly its addresses.
func TestEachPrefix(t *testing.T) {
	for _, tt := range []struct {
		ts   TS
		want []string
	}{
		{tsRange("10.2.0.5", "10.2.0.9"), []string{"10.2.0.5/32", "10.2.0.6/31", "10.2.0.8/31"}},
		{tsRange("0.0.0.0", "255.255.255.255"), []string{"0.0.0.0/0"}},
		{tsRange("255.255.255.254", "255.255.255.255"), []string{"255.255.255.254/31"}},
		{tsRange("10.0.0.1", "10.0.0.1"), []string{"10.0.0.1/32"}},
		{tsRange("2001:db8::ffff", "2001:db8::1:0"), []string{"2001:db8::ffff/128", "2001:db8::1:0/128"}},
		{tsRange("::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"), []string{"::/0"}},
	} {
		var got []string
		tt.ts.eachPrefix(func(p netip.Prefix) bool { got = append(got, p.String()); return true })
		if len(got) != len(tt.want) {
			t.Errorf("%v: %v, want %v", tt.ts, got, tt.want)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("%v: %v, want %v", tt.ts, got, tt.want)
				break
			}
		}
	}
	var n int
	full := tsRange("0.0.0.1", "255.255.255.254")
	full.eachPrefix(func(netip.Prefix) bool { n++; return true })
	if n != 62 {
		t.Errorf("0.0.0.1-255.255.255.254: %d prefixes, want 62", n)
	}
	n = 0
	manyRanges(1)[0].eachPrefix(func(netip.Prefix) bool { n++; return true })
	if n != 254 {
		t.Errorf("::1-ffff:...:fffe: %d prefixes, want 254", n)
	}
}

// FuzzRangePrefix: rangePrefix's arithmetic agrees with trying every
// prefix length, in both families.
func FuzzRangePrefix(f *testing.F) {
	f.Add([]byte{10, 2, 0, 5}, []byte{10, 2, 0, 9})
	f.Add([]byte{0, 0, 0, 0}, []byte{255, 255, 255, 255})
	f.Add(make([]byte, 16), bytes.Repeat([]byte{0xff}, 16))
	f.Add(netip.MustParseAddr("2001:db8::ffff").AsSlice(), netip.MustParseAddr("2001:db8::1:0").AsSlice())
	f.Fuzz(func(t *testing.T, a, b []byte) {
		start, ok1 := netip.AddrFromSlice(a)
		end, ok2 := netip.AddrFromSlice(b)
		if !ok1 || !ok2 || start.Is4() != end.Is4() {
			return
		}
		got, ok := rangePrefix(start, end)
		var want netip.Prefix
		if !end.Less(start) {
			for bits := 0; bits <= start.BitLen(); bits++ {
				p := netip.PrefixFrom(start, bits).Masked()
				if p.Addr() == start && !end.Less(lastAddr(p)) {
					want = p
					break
				}
			}
		}
		if ok != want.IsValid() || got != want {
			t.Fatalf("rangePrefix(%v, %v) = %v, %v; want %v", start, end, got, ok, want)
		}
	})
}

// manyRanges is n IPv6 ranges of 254 prefixes each (all addresses but
// :: and the last).
func manyRanges(n int) []TS {
	out := make([]TS, n)
	for i := range out {
		out[i] = tsRange("::1", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe")
	}
	return out
}
