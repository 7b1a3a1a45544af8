// Package looppair finds two loopback addresses for tests of IKE on a
// netstack, whose underlay must be on port 4500 (the port IKE's peers send
// to once UDP-encapsulated): other tests, or a daemon, may hold
// 127.0.0.1:4500, so a random pair in 127/8 is tried instead.
package looppair

import (
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"
)

// NATT returns 127.x.y.1 and 127.x.y.2, for a random x.y, on both of
// which UDP port 4500 is free, trying 50 pairs at most.
func NATT(t testing.TB) (a, b netip.Addr) {
	t.Helper()
	for range 50 {
		x, y := byte(rand.N(250)+1), byte(rand.N(250)+1)
		a, b = netip.AddrFrom4([4]byte{127, x, y, 1}), netip.AddrFrom4([4]byte{127, x, y, 2})
		if free(a) && free(b) {
			return a, b
		}
	}
	t.Fatal("no pair of loopback addresses with port 4500 free in 50 tries")
	return
}

func free(a netip.Addr) bool {
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, 4500)))
	if err != nil {
		return false
	}
	c.Close()
	return true
}
