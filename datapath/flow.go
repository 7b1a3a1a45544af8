package datapath

import "encoding/binary"

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
	if queues <= 1 || len(pkt) < 1 {
		return 0
	}
	var h uint32
	var proto byte
	var l4 []byte
	switch pkt[0] >> 4 {
	case 4:
		if len(pkt) < 20 {
			return 0
		}
		h = binary.BigEndian.Uint32(pkt[12:16]) ^ binary.BigEndian.Uint32(pkt[16:20])
		proto = pkt[9]
		ihl := int(pkt[0]&0x0f) * 4
		fragmented := binary.BigEndian.Uint16(pkt[6:8])&0x3fff != 0
		if !fragmented && ihl >= 20 && len(pkt) >= ihl+4 {
			l4 = pkt[ihl:]
		}
	case 6:
		if len(pkt) < 40 {
			return 0
		}
		for i := 8; i < 40; i += 4 {
			h ^= binary.BigEndian.Uint32(pkt[i : i+4])
		}
		proto = pkt[6]
		if len(pkt) >= 44 {
			l4 = pkt[40:]
		}
	default:
		return 0
	}
	switch proto {
	case 6, 17, 132: // TCP, UDP, SCTP: ports
		if l4 != nil {
			h ^= uint32(binary.BigEndian.Uint16(l4[0:2]) ^ binary.BigEndian.Uint16(l4[2:4]))
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
