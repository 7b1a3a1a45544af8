// Matching packets against selectors: what a traffic selector reads of a
// packet (its flow) and whether a selector admits it.

package sa

import (
	"net/netip"

	"github.com/ipsecd/ipsecd/internal/iphdr"
)

// flow is what a traffic selector reads of a packet.
type flow struct {
	src, dst netip.Addr
	proto    uint8
	// ports: sport and dport could be read (for ICMP both are the type
	// and code). Not for fragments, whose first one Linux does not read
	// them of either, nor for protocols without ports.
	ports        bool
	sport, dport uint16
}

// maxExtensions bounds the walk through IPv6 extension headers.
const maxExtensions = 8

// flowOf reads a whole IP packet, whose version and addresses innerAddrs
// has found readable. What cannot be read stays unset: a proto of an
// extension header, ports false.
func flowOf(pkt []byte, src, dst netip.Addr) flow {
	f := flow{src: src, dst: dst}
	if iphdr.Version(pkt) == 4 {
		h := iphdr.IPv4(pkt)
		f.proto = h.Protocol()
		if h.IsValid() && !h.IsFragment() {
			end := min(h.TotalLen(), len(pkt))
			if end >= h.HeaderLen() {
				f.readPorts(pkt[h.HeaderLen():end])
			}
		}
		return f
	}
	proto, rest := iphdr.IPv6(pkt).NextHeader(), pkt[iphdr.IPv6Len:]
	for range maxExtensions {
		switch proto {
		case iphdr.IPv6HopByHop, iphdr.IPv6Routing, iphdr.IPv6DestOpts, iphdr.IPv6Fragment:
		default:
			f.proto = proto
			f.readPorts(rest)
			return f
		}
		next, r, ok := iphdr.SkipExtension(proto, rest)
		if !ok {
			f.proto = proto
			return f
		}
		if proto == iphdr.IPv6Fragment {
			// A fragment: the protocol is known, the ports are not read
			// (a later fragment has none; of the first, as of an IPv4
			// one, Linux does not read them either).
			f.proto = next
			return f
		}
		proto, rest = next, r
	}
	f.proto = proto
	return f
}

// readPorts reads the ports of f.proto at the start of l4.
func (f *flow) readPorts(l4 []byte) {
	switch f.proto {
	case iphdr.ProtocolTCP, iphdr.ProtocolUDP, iphdr.ProtocolSCTP, protoDCCP, protoUDPLite:
		f.sport, f.dport, f.ports = iphdr.Ports(l4)
	case protoICMP, protoICMPv6:
		if len(l4) >= 2 {
			f.sport = uint16(l4[0])<<8 | uint16(l4[1])
			f.dport, f.ports = f.sport, true
		}
	case protoMH:
		if len(l4) >= 3 {
			f.sport = uint16(l4[2]) << 8
			f.dport, f.ports = f.sport, true
		}
	}
}

// Protocols with ports, or what RFC 4301 reads as ports, beside iphdr's.
const (
	protoICMP    = 1
	protoDCCP    = 33
	protoICMPv6  = 58
	protoMH      = 135
	protoUDPLite = 136
)

// admits reports whether the set holds a packet of f.
func (set *TSSet) admits(f *flow) bool {
	return tsMatch(set.Src, f.src, f, f.sport) && tsMatch(set.Dst, f.dst, f, f.dport)
}

// tsMatch reports whether one of l holds address a with f's protocol and
// port. A port restriction admits only a packet whose ports were read.
func tsMatch(l []TS, a netip.Addr, f *flow, port uint16) bool {
	for i := range l {
		t := &l[i]
		if a.Less(t.Start) || t.End.Less(a) || (t.Proto != 0 && t.Proto != f.proto) {
			continue
		}
		if t.anyPort() || (f.ports && t.StartPort <= port && port <= t.EndPort) {
			return true
		}
	}
	return false
}

// admitsPacket reports whether a whole inner IP packet may come out of an
// SA with this selector (tunnel mode). The zero selector, the common
// case, admits every packet without looking at it; a prefix of the other
// family never matches.
func (sel *Selector) admitsPacket(pkt []byte) bool {
	if sel.MatchesAll() {
		return true
	}
	src, dst, ok := innerAddrs(pkt)
	if !ok {
		return false
	}
	if sel.TS != nil {
		f := flowOf(pkt, src, dst)
		return sel.TS.admits(&f)
	}
	return sel.match(src, dst)
}

// admitsTransport is admitsPacket for a transport-mode payload of
// protocol proto behind a header from src to dst (the rebuilt one).
func (sel *Selector) admitsTransport(src, dst netip.Addr, proto uint8, payload []byte) bool {
	if sel.MatchesAll() {
		return true
	}
	if sel.TS != nil {
		for range maxExtensions { // destination options travel inside ESP
			next, rest, ok := iphdr.SkipExtension(proto, payload)
			if proto != iphdr.IPv6DestOpts || !src.Is6() || !ok {
				break
			}
			proto, payload = next, rest
		}
		f := flow{src: src, dst: dst, proto: proto}
		f.readPorts(payload)
		return sel.TS.admits(&f)
	}
	return sel.match(src, dst)
}
