package sa

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/ipsecd/ipsecd/internal/iphdr"
)

// Selectors as IKEv2 negotiates them (RFC 7296 §2.9, §3.13.1): on each
// side a list of address ranges, each with an IP protocol and a port
// range. A Selector holds one as a TSSet when its two prefixes cannot say
// it exactly; the SA then admits, seals and is looked up by the whole set,
// never by a wider one (what Linux does with one xfrm policy per pair of
// traffic selectors, here on the SA itself).

// TS is one traffic selector: an inclusive range of addresses of one
// family, an IP protocol (0: any) and an inclusive range of ports (0 to
// 65535: any). For ICMP, ICMPv6 and the IPv6 mobility header the "port"
// is the message type and code, type<<8 | code (RFC 4301 §4.4.1.1;
// mobility header: its type<<8). The zero TS is invalid.
type TS struct {
	Start, End         netip.Addr
	Proto              uint8
	StartPort, EndPort uint16
}

// PrefixTS returns the traffic selector of every packet of prefix p, of
// any protocol and port.
func PrefixTS(p netip.Prefix) TS {
	p = p.Masked()
	return TS{Start: p.Addr(), End: lastAddr(p), EndPort: 0xffff}
}

// anyPort reports whether t admits every port.
func (t *TS) anyPort() bool { return t.StartPort == 0 && t.EndPort == 0xffff }

// Prefix returns the prefix that is exactly t, when t is of any protocol
// and port and its range is one prefix.
func (t TS) Prefix() (netip.Prefix, bool) {
	if t.Proto != 0 || !t.anyPort() || !t.Start.IsValid() || t.Start.Is4() != t.End.Is4() {
		return netip.Prefix{}, false
	}
	p, ok := rangePrefix(t.Start, t.End)
	return p, ok && lastAddr(p) == t.End
}

// rangePrefix returns the largest prefix that starts at start and ends
// at or before end (addresses of one family); false when start is after
// end. Its size is the smaller of what start's alignment allows (its
// trailing zero bits) and what the range holds (the log2 of its length).
func rangePrefix(start, end netip.Addr) (netip.Prefix, bool) {
	if end.Less(start) || start.Is4() != end.Is4() {
		return netip.Prefix{}, false
	}
	n := start.BitLen()
	sHi, sLo := addrBits(start)
	eHi, eLo := addrBits(end)
	// d = end - start, in 128 bits.
	dLo, borrow := bits.Sub64(eLo, sLo, 0)
	dHi, _ := bits.Sub64(eHi, sHi, borrow)
	// The range holds d+1 addresses: room for a block of 2^k with k the
	// highest bit of d+1 (all of them when d+1 overflows the family).
	lLo, carry := bits.Add64(dLo, 1, 0)
	lHi, _ := bits.Add64(dHi, 0, carry)
	k := n
	switch {
	case n == 32 && lLo>>32 == 0:
		k = 63 - bits.LeadingZeros64(lLo)
	case n == 128 && lHi != 0:
		k = 127 - bits.LeadingZeros64(lHi)
	case n == 128 && lLo != 0:
		k = 63 - bits.LeadingZeros64(lLo)
	}
	// start is aligned to 2^tz.
	tz := n
	switch {
	case sLo != 0:
		tz = bits.TrailingZeros64(sLo)
	case n == 128 && sHi != 0:
		tz = 64 + bits.TrailingZeros64(sHi)
	}
	return netip.PrefixFrom(start, n-min(k, tz, n)), true
}

// addrBits returns a's bits as a 128-bit number (an IPv4 address in the
// low 32).
func addrBits(a netip.Addr) (hi, lo uint64) {
	if a.Is4() {
		b := a.As4()
		return 0, uint64(binary.BigEndian.Uint32(b[:]))
	}
	b := a.As16()
	return binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
}

// lastAddr returns the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr()
	if a.Is4() {
		b := a.As4()
		v := binary.BigEndian.Uint32(b[:]) | uint32(uint64(1)<<(32-p.Bits())-1)
		binary.BigEndian.PutUint32(b[:], v)
		return netip.AddrFrom4(b)
	}
	b := a.As16()
	for i := p.Bits(); i < 128; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	return netip.AddrFrom16(b)
}

// eachPrefix calls fn with the prefixes that together are exactly t's
// addresses (at most two per bit of the address), in order, until fn
// returns false.
func (t *TS) eachPrefix(fn func(netip.Prefix) bool) {
	for a := t.Start; a.IsValid(); {
		p, ok := rangePrefix(a, t.End)
		if !ok || !fn(p) {
			return
		}
		last := lastAddr(p)
		if last == t.End {
			return
		}
		a = last.Next()
	}
}

// String writes t as swanctl.conf writes a traffic selector: a prefix or
// an address range, then [protocol/ports] when it has them
// (10.1.0.0/24[tcp/80], 10.1.0.5-10.1.0.9[udp/1000-2000]).
func (t TS) String() string {
	var b strings.Builder
	if p, ok := (TS{Start: t.Start, End: t.End, EndPort: 0xffff}).Prefix(); ok {
		b.WriteString(p.String())
	} else {
		b.WriteString(t.Start.String() + "-" + t.End.String())
	}
	if t.Proto == 0 && t.anyPort() {
		return b.String()
	}
	b.WriteByte('[')
	switch t.Proto {
	case 0:
		b.WriteString("any")
	case 1:
		b.WriteString("icmp")
	case iphdr.ProtocolTCP:
		b.WriteString("tcp")
	case iphdr.ProtocolUDP:
		b.WriteString("udp")
	case 58:
		b.WriteString("ipv6-icmp")
	case iphdr.ProtocolSCTP:
		b.WriteString("sctp")
	default:
		b.WriteString(strconv.Itoa(int(t.Proto)))
	}
	switch {
	case t.anyPort():
	case t.StartPort == t.EndPort:
		b.WriteString("/" + strconv.Itoa(int(t.StartPort)))
	default:
		b.WriteString("/" + strconv.Itoa(int(t.StartPort)) + "-" + strconv.Itoa(int(t.EndPort)))
	}
	b.WriteByte(']')
	return b.String()
}

// TSSet is a selector of traffic selectors: a packet matches when its
// source matches one of Src and its destination one of Dst, each with
// its protocol and ports. Neither list is empty. A TSSet in a Selector
// is never changed: Selectors share it.
type TSSet struct {
	Src, Dst []TS
}

// NewSelector returns the selector of exactly the packets from one of
// src to one of dst. When each side is one prefix of any protocol and
// port, of one family, it is the prefix pair (Selector's Src and Dst), as
// a static state's; otherwise a TSSet of copies of the lists. The error,
// if any, is FieldErrors naming src_ts[N] or dst_ts[N].
func NewSelector(src, dst []TS) (Selector, error) {
	var errs FieldErrors
	checkTSList(src, "src_ts", &errs)
	checkTSList(dst, "dst_ts", &errs)
	if errs != nil {
		return Selector{}, errs
	}
	if len(src) == 1 && len(dst) == 1 {
		s, okS := src[0].Prefix()
		d, okD := dst[0].Prefix()
		if okS && okD && s.Addr().Is4() == d.Addr().Is4() {
			return Selector{Src: s, Dst: d}, nil
		}
	}
	return Selector{TS: &TSSet{Src: slices.Clone(src), Dst: slices.Clone(dst)}}, nil
}

// Reverse returns the selector of the other direction: its sources are
// s's destinations and the reverse. An outbound SA's selector reversed is
// its inbound twin's.
func (s Selector) Reverse() Selector {
	r := Selector{Src: s.Dst, Dst: s.Src}
	if s.TS != nil {
		r.TS = &TSSet{Src: s.TS.Dst, Dst: s.TS.Src}
	}
	return r
}

// MatchesAll reports whether s is the zero selector, which admits every
// packet.
func (s Selector) MatchesAll() bool {
	return !s.Src.IsValid() && !s.Dst.IsValid() && s.TS == nil
}

func tsListText(l []TS) string {
	parts := make([]string, len(l))
	for i, t := range l {
		parts[i] = t.String()
	}
	return strings.Join(parts, ",")
}

// Limits of a TSSet, so that no peer's selectors make the SAD's changes
// slow: each side holds at most MaxTS traffic selectors, whose ranges are
// at most MaxTSPrefixes prefixes (the outbound lookup indexes an SA under
// each prefix of its destinations, again at every change of its
// interface's SAs). RFC 7296 carries at most 255 in a TS payload.
const (
	MaxTS         = 256
	MaxTSPrefixes = 4096
)

func checkTSList(l []TS, field string, errs *FieldErrors) {
	switch {
	case len(l) == 0:
		errs.add(field, "empty: a selector of traffic selectors needs at least one on each side")
	case len(l) > MaxTS:
		errs.add(field, "%d traffic selectors; at most %d", len(l), MaxTS)
		return
	}
	bad := len(*errs)
	for i := range l {
		checkTS(&l[i], fmt.Sprintf("%s[%d]", field, i), errs)
	}
	if len(*errs) != bad {
		return
	}
	n := 0
	for i := range l {
		l[i].eachPrefix(func(netip.Prefix) bool { n++; return n <= MaxTSPrefixes })
	}
	if n > MaxTSPrefixes {
		errs.add(field, "the ranges are more than %d prefixes", MaxTSPrefixes)
	}
}

// checkTS refuses what would make a selector other than its words say:
// a range of two families, or reversed; reversed ports (which RFC 7296
// uses for OPAQUE, which an SA cannot enforce and IKE never agrees to).
func checkTS(t *TS, field string, errs *FieldErrors) {
	switch {
	case !t.Start.IsValid() || !t.End.IsValid():
		errs.add(field, "missing address")
	case t.Start.Is4() != t.End.Is4() || t.Start.Zone() != "" || t.End.Zone() != "":
		errs.add(field, "%s-%s is not a range of one family", t.Start, t.End)
	case t.End.Less(t.Start):
		errs.add(field, "%s-%s ends before it starts", t.Start, t.End)
	}
	if t.StartPort > t.EndPort {
		errs.add(field, "ports %d-%d end before they start (OPAQUE is not supported)", t.StartPort, t.EndPort)
	}
}
