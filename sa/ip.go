package sa

import (
	"net/netip"

	"github.com/ipsecd/ipsecd/internal/iphdr"
	"github.com/ipsecd/ipsecd/sa/esp"
)

// Inner IP headers: just what ESP needs, read and written in place through
// iphdr.

// rebuiltTTL is the TTL (hop limit) of the header transport mode rebuilds.
const rebuiltTTL = 64

// tunnelNextHeader returns the ESP next header for a whole inner packet:
// 4 for IPv4, 41 for IPv6, false for anything else.
func tunnelNextHeader(pkt []byte) (uint8, bool) {
	switch iphdr.Version(pkt) {
	case 4:
		if len(pkt) >= iphdr.IPv4MinLen {
			return esp.NextHeaderIPv4, true
		}
	case 6:
		if len(pkt) >= iphdr.IPv6Len {
			return esp.NextHeaderIPv6, true
		}
	}
	return 0, false
}

// transportHeader checks that pkt is a datagram transport mode can carry
// and returns the length of its IP header (which transport mode strips)
// and the protocol it carries, the ESP next header. See transportPayload
// for what the payload must be; the header must describe pkt exactly
// (IPv4: a valid IHL, a total length of len(pkt), no fragment; IPv6: a
// payload length of len(pkt)-40, so no jumbogram), by the rules of the
// package doc ("Modes").
func transportHeader(pkt []byte) (hdrLen int, proto uint8, ok bool) {
	switch iphdr.Version(pkt) {
	case 4:
		h := iphdr.IPv4(pkt)
		if !h.IsValid() || h.TotalLen() != len(pkt) || h.IsFragment() ||
			!transportPayload(false, h.Protocol(), h.Payload()) {
			return 0, 0, false
		}
		return h.HeaderLen(), h.Protocol(), true
	case 6:
		h := iphdr.IPv6(pkt)
		if !h.IsValid() || h.PayloadLen() != len(pkt)-iphdr.IPv6Len ||
			!transportPayload(true, h.NextHeader(), h.Payload()) {
			return 0, 0, false
		}
		return iphdr.IPv6Len, h.NextHeader(), true
	}
	return 0, 0, false
}

// transportPayload reports whether payload, behind an IPv4 (v6 false) or
// IPv6 header with protocol proto, is something transport mode carries.
// Both directions use it: SealBatch on the payload it is about to seal,
// OpenBatch on the payload it is about to put behind a rebuilt header.
//
// IPv6 extension headers (RFC 8200 §4.1): ESP goes after the hop-by-hop,
// routing and fragment headers (RFC 4303 §3.1.1), which would have to
// stay in the outer header. The outer header here is not the inner one
// (the underlay builds it from the SA), so a packet with any of them is
// refused, and a payload that would put one behind the rebuilt header
// (where hop-by-hop is not allowed at all, and a fragment header would
// make the rebuilt datagram a fragment) is refused too. Destination
// options may go either side of ESP: they travel inside it, and the walk
// goes through them to check what follows.
//
// The upper layer's own length must agree with the payload's: a UDP
// header's length is the payload's length, a TCP header's data offset is
// inside it. A payload that fails this is the piece of a datagram (or
// garbage that authenticated), which the rebuilt header would misdescribe.
func transportPayload(v6 bool, proto uint8, payload []byte) bool {
	if v6 {
		for proto == iphdr.IPv6DestOpts {
			var ok bool
			if proto, payload, ok = iphdr.SkipExtension(proto, payload); !ok {
				return false
			}
		}
		switch proto {
		case iphdr.IPv6HopByHop, iphdr.IPv6Routing, iphdr.IPv6Fragment:
			return false
		}
	}
	switch proto {
	case iphdr.ProtocolTCP:
		return iphdr.TCP(payload).IsValid()
	case iphdr.ProtocolUDP:
		u := iphdr.UDP(payload)
		return u.IsValid() && u.Length() == len(payload)
	}
	return true
}

// innerAddrs returns the source and destination of an IP packet. An IPv4
// header needs only its fixed 20 bytes here, not a valid IHL: tunnel mode
// carries the inner header as it is, and the addresses are all a lookup
// reads.
func innerAddrs(pkt []byte) (src, dst netip.Addr, ok bool) {
	switch iphdr.Version(pkt) {
	case 4:
		if h := iphdr.IPv4(pkt); len(h) >= iphdr.IPv4MinLen {
			return h.Src(), h.Dst(), true
		}
	case 6:
		if h := iphdr.IPv6(pkt); h.IsValid() {
			return h.Src(), h.Dst(), true
		}
	}
	return src, dst, false
}
