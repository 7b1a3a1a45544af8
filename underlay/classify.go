package underlay

import "github.com/ipsecd/ipsecd/internal/iphdr"

// Datagram kinds found on the ESP-in-UDP port (RFC 3948 §2.2, §2.3).
type kind uint8

const (
	kindESP       kind = iota // SPI..ICV: hand up
	kindKeepalive             // one 0xFF byte: drop and count
	kindNonESP                // four zero bytes, then IKE: drop, count, hook
	kindShort                 // too short to be ESP: drop, count as header error
)

// minESP is the smallest ESP packet: SPI (4) and sequence number (4).
const minESP = 8

// classifyUDP says what a datagram received on the ESP-in-UDP port is.
func classifyUDP(b []byte) kind {
	if len(b) == 1 && b[0] == 0xff {
		return kindKeepalive
	}
	if len(b) >= 4 && b[0]|b[1]|b[2]|b[3] == 0 {
		return kindNonESP
	}
	if len(b) < minESP {
		return kindShort
	}
	return kindESP
}

// classifyRaw says what a raw ESP packet is: there is no marker and no
// keepalive, and SPI 0 is never sent (RFC 4303 §2.1).
func classifyRaw(b []byte) kind {
	if len(b) < minESP || b[0]|b[1]|b[2]|b[3] == 0 {
		return kindShort
	}
	return kindESP
}

// ipv4Payload returns the payload of a raw IPv4 packet as start offset, or
// -1 if the header is malformed. Raw IPv4 sockets on Linux deliver the IP
// header in front of the payload; its length is IHL*4 (20 to 60 bytes).
func ipv4Payload(b []byte) int {
	h := iphdr.IPv4(b)
	if !h.IsValid() {
		return -1
	}
	return h.HeaderLen()
}
