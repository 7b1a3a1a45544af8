// Package iphdr reads and writes IPv4 (RFC 791), IPv6 (RFC 8200) and the
// start of UDP (RFC 768) and TCP (RFC 9293) headers in place, as typed byte
// slices in the style of gVisor's tcpip/header: offsets are unexported
// constants under each RFC's diagram, and IsValid is the one bounds check
// a reader makes before it calls the accessors, which then index without
// checking again (an accessor on a slice that failed IsValid may panic).
//
// It is the one reading of IP headers in ipsecd: the ESP codec (sa) reads
// the inner header to seal and writes it when it opens in transport mode,
// the data path hashes flows onto queues, the underlay finds the payload
// of a raw IPv4 socket's packet and the netstack link splits TCP
// super-packets, all through these types. Why not gVisor's own types, which
// the netstack link already links: see docs/design.md ("IP headers").
//
// Nothing here allocates or keeps a reference to a slice; every function
// is safe for concurrent use on slices no one writes.
package iphdr

// IP protocol numbers (IANA "Assigned Internet Protocol Numbers") that the
// readers look at: the upper layers whose ports or lengths they read, and
// the IPv6 extension headers of RFC 8200 §4.
const (
	ProtocolTCP  = 6
	ProtocolUDP  = 17
	ProtocolSCTP = 132

	IPv6HopByHop = 0
	IPv6Routing  = 43
	IPv6Fragment = 44
	IPv6DestOpts = 60
)

// Version returns the IP version in the first 4 bits of b (4 or 6 for IP),
// or 0 if b is empty. It checks nothing else: IPv4(b).IsValid or
// IPv6(b).IsValid say whether the header is whole.
func Version(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	return int(b[0] >> 4)
}
