package datapath

import (
	"encoding/binary"

	"github.com/ipsecd/ipsecd/internal/iphdr"
)

// flowQueue picks the interface queue an inbound cleartext packet is
// written to: the same queue for every packet of a flow, in both
// directions. It matters because a multiqueue TUN steers a flow's
// outbound packets to the queue the flow's inbound packets were last
// written to (tun_automq_select_queue): a flow whose writes hop between
// queues has its outbound packets read by several workers and reordered,
// by more than the peer's replay window under load.
//
// The hash is symmetric (addresses and ports are combined with XOR), so
// a flow and its reverse land on one queue.
func flowQueue(pkt []byte, queues int) int {
	if queues <= 1 {
		return 0
	}
	var h uint32
	var proto uint8
	var l4 []byte
	switch iphdr.Version(pkt) {
	case 4:
		ip := iphdr.IPv4(pkt)
		if len(ip) < iphdr.IPv4MinLen {
			return 0
		}
		a := ip.Addrs()
		h = binary.BigEndian.Uint32(a[0:4]) ^ binary.BigEndian.Uint32(a[4:8])
		proto = ip.Protocol()
		// Only the first fragment has the ports, so no fragment uses them:
		// the fragments of one datagram stay together.
		if ip.IsValid() && !ip.IsFragment() {
			l4 = ip.Payload()
		}
	case 6:
		ip := iphdr.IPv6(pkt)
		if !ip.IsValid() {
			return 0
		}
		a := ip.Addrs()
		for i := 0; i < len(a); i += 4 {
			h ^= binary.BigEndian.Uint32(a[i : i+4])
		}
		proto, l4 = ip.NextHeader(), ip.Payload()
	default:
		return 0
	}
	switch proto {
	case iphdr.ProtocolTCP, iphdr.ProtocolUDP, iphdr.ProtocolSCTP:
		if sport, dport, ok := iphdr.Ports(l4); ok {
			h ^= uint32(sport ^ dport)
		}
	}
	h ^= uint32(proto)
	// Finalise (murmur3's fmix32) so that nearby addresses spread.
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return int(h % uint32(queues))
}
