package underlay

import (
	"bytes"
	"net"
	"net/netip"
	"testing"
	"time"
)

// TestWriteNonESP: IKE leaves the ESP-in-UDP socket after the non-ESP
// marker, and a keepalive is the one 0xFF byte, both from the socket's
// port.
func TestWriteNonESP(t *testing.T) {
	c := openConn(t, Config{UDP: netip.MustParseAddrPort("127.0.0.1:0")})
	peer, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	to := netip.MustParseAddrPort(peer.LocalAddr().String())
	ike := []byte{0x11, 0x22, 0x33, 0x44, 0x55}
	if err := c.WriteNonESP(ike, to, netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteKeepalive(to, netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	for _, want := range [][]byte{append([]byte{0, 0, 0, 0}, ike...), {0xff}} {
		buf := make([]byte, 100)
		n, from, err := peer.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf[:n], want) || from.Port() != c.Port() {
			t.Errorf("got % x from %v, want % x from port %d", buf[:n], from, want, c.Port())
		}
	}
}
