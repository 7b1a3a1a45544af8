// Package grotest is the kernel's side of package gro's frames, for tests:
// the packets Linux makes of a frame written to a TUN with IFF_VNET_HDR
// (virtio_net_hdr_to_skb, then, on forwarding, GSO: tcp_gso_segment with
// inet_gso_segment or ipv6_gso_segment), each with its checksums computed.
package grotest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/ipsecd/ipsecd/internal/iphdr"
	"github.com/ipsecd/ipsecd/internal/vnet"
	"github.com/ipsecd/ipsecd/sa/satest"
)

// Resegment returns the packets the kernel makes of the frame written as
// parts, or an error naming what the kernel would refuse or what is
// inconsistent: a header that does not describe the frame, or a partial
// checksum that does not complete to the super-packet's TCP checksum
// (what a locally delivered super-packet is checked against).
func Resegment(parts [][]byte) ([][]byte, error) {
	var h vnet.Header
	if !h.Decode(parts[0]) {
		return nil, fmt.Errorf("frame shorter than its virtio-net header")
	}
	pkt := slices.Concat(append([][]byte{parts[0][vnet.HeaderLen:]}, parts[1:]...)...)
	if h.GSOType == vnet.GSONone {
		if h != (vnet.Header{}) || len(parts) != 1 {
			return nil, fmt.Errorf("single packet with header %+v in %d parts", h, len(parts))
		}
		return [][]byte{pkt}, nil
	}
	if h.Flags != vnet.FlagNeedsCsum || h.CsumOffset != 16 || int(h.HdrLen) > len(pkt) || h.GSOSize == 0 {
		return nil, fmt.Errorf("super-packet header %+v", h)
	}
	v6 := h.GSOType == vnet.GSOTCPv6
	if v6 != (pkt[0]>>4 == 6) || (!v6 && h.GSOType != vnet.GSOTCPv4) {
		return nil, fmt.Errorf("GSO type %d for IP version %d", h.GSOType, pkt[0]>>4)
	}
	ihl := int(h.CsumStart)
	if v6 {
		if n := int(binary.BigEndian.Uint16(pkt[4:])); n != len(pkt)-40 {
			return nil, fmt.Errorf("super-packet payload length %d, want %d", n, len(pkt)-40)
		}
	} else {
		ip := iphdr.IPv4(pkt)
		if ip.TotalLen() != len(pkt) || !ip.ChecksumValid() {
			return nil, fmt.Errorf("super-packet IPv4 total length %d (want %d), checksum valid %v", ip.TotalLen(), len(pkt), ip.ChecksumValid())
		}
	}
	// The partial checksum, completed as the kernel would, must check.
	whole := slices.Clone(pkt)
	tcp := whole[ihl:]
	sum := uint32(binary.BigEndian.Uint16(tcp[16:]))
	tcp[16], tcp[17] = 0, 0
	c := ^satest.OnesSum(sum, tcp)
	binary.BigEndian.PutUint16(tcp[16:], c)
	check := slices.Clone(whole)
	satest.SetTCPChecksum(check)
	if !bytes.Equal(check, whole) {
		return nil, fmt.Errorf("partial checksum completes to %#04x, want %#04x", c, binary.BigEndian.Uint16(check[ihl+16:]))
	}

	hdr := pkt[:h.HdrLen]
	payload := pkt[h.HdrLen:]
	seq := binary.BigEndian.Uint32(hdr[ihl+4:])
	var out [][]byte
	for k := 0; len(payload) > 0; k++ {
		n := min(int(h.GSOSize), len(payload))
		seg := slices.Concat(hdr, payload[:n])
		payload = payload[n:]
		if v6 {
			binary.BigEndian.PutUint16(seg[4:], uint16(len(seg)-40))
		} else {
			ip := iphdr.IPv4(seg)
			ip.SetTotalLen(len(seg))
			ip.SetID(ip.ID() + uint16(k))
			ip.UpdateChecksum()
		}
		tcp := iphdr.TCP(seg[ihl:])
		tcp.SetSeq(seq + uint32(k)*uint32(h.GSOSize))
		if len(payload) > 0 {
			tcp.SetFlags(tcp.Flags() &^ (iphdr.TCPFlagPsh | iphdr.TCPFlagFin))
		}
		satest.SetTCPChecksum(seg)
		out = append(out, seg)
	}
	return out, nil
}

// SameFlowsInOrder reports whether got holds the packets of want, each
// flow's (by protocol, addresses and ports) in want's order; flows may
// interleave differently.
func SameFlowsInOrder(got, want [][]byte) bool {
	if len(got) != len(want) {
		return false
	}
	key := func(p []byte) string {
		if p[0]>>4 == 6 {
			return fmt.Sprintf("%x%x%d", p[8:40], p[40:44], p[6])
		}
		return fmt.Sprintf("%x%x%d", p[12:20], p[20:24], p[9])
	}
	byFlow := func(ps [][]byte) map[string][][]byte {
		m := map[string][][]byte{}
		for _, p := range ps {
			m[key(p)] = append(m[key(p)], p)
		}
		return m
	}
	g, w := byFlow(got), byFlow(want)
	if len(g) != len(w) {
		return false
	}
	for k, ps := range w {
		if !slices.EqualFunc(g[k], ps, bytes.Equal) {
			return false
		}
	}
	return true
}
