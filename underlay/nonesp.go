package underlay

import "net/netip"

// nonESPMarker precedes IKE on the ESP-in-UDP port (RFC 3948 §2.2): the
// four zero bytes where ESP has its SPI, which is never 0.
var nonESPMarker = [4]byte{}

// WriteNonESP sends IKE message b to peer from the ESP-in-UDP socket,
// after the non-ESP marker, as RFC 3948 §2.2 has IKE share port 4500 with
// ESP. local selects the source address on a socket bound to an
// unspecified address (invalid: the kernel picks). It goes through
// WriteBatch, so it is safe beside the data path's sends; b is not
// retained.
func (c *Conn) WriteNonESP(b []byte, peer netip.AddrPort, local netip.Addr) error {
	buf := make([]byte, len(nonESPMarker)+len(b))
	copy(buf[len(nonESPMarker):], b)
	return c.WriteBatch([]Message{{Buf: buf, Len: len(buf), Peer: peer, Local: local}})
}

// WriteKeepalive sends a NAT keepalive (RFC 3948 §2.3: one 0xFF byte) to
// peer from the ESP-in-UDP socket, to keep a NAT's mapping open.
func (c *Conn) WriteKeepalive(peer netip.AddrPort, local netip.Addr) error {
	return c.WriteBatch([]Message{{Buf: []byte{0xff}, Len: 1, Peer: peer, Local: local}})
}
