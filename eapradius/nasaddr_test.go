package eapradius

import (
	"bytes"
	"net"
	"net/netip"
	"testing"

	"layeh.com/radius"
	"layeh.com/radius/rfc2865"
)

// TestNASAddress: a request of no session names the address it leaves
// from, NAS-IPv6-Address for an IPv6 one; nas_ip, when set, is in every
// request instead of the session's Called address, and a request that
// names one keeps it.
func TestNASAddress(t *testing.T) {
	onV6 := withNASAddr(radius.New(radius.CodeAccountingRequest, nil), &net.UDPAddr{IP: net.ParseIP("2001:db8::7"), Port: 40000})
	if v := onV6.Get(nasIPv6AddressType); !bytes.Equal(v, netip.MustParseAddr("2001:db8::7").AsSlice()) || onV6.Get(rfc2865.NASIPAddress_Type) != nil {
		t.Errorf("NAS-IPv6-Address %x, NAS-IP-Address %x; want 2001:db8::7 alone", v, onV6.Get(rfc2865.NASIPAddress_Type))
	}
	named := radius.New(radius.CodeAccountingRequest, nil)
	addNASAddr(named, netip.MustParseAddr("198.51.100.9"))
	if got := withNASAddr(named, &net.UDPAddr{IP: net.ParseIP("127.0.0.1")}); got != named || len(got.Attributes) != 1 {
		t.Errorf("a request naming its NAS got %v; want it unchanged", got.Attributes)
	}
	c := testClient(t, Config{Servers: []Server{{Address: "127.0.0.1:1", Secret: []byte("s")}}, NASIP: netip.MustParseAddr("2001:db8::1")})
	if got := c.nasAddr(netip.MustParseAddr("192.0.2.1")); got != netip.MustParseAddr("2001:db8::1") {
		t.Errorf("nas_ip set: the session's NAS address is %v; want nas_ip", got)
	}
	c = testClient(t, Config{Servers: []Server{{Address: "127.0.0.1:1", Secret: []byte("s")}}})
	if got := c.nasAddr(netip.MustParseAddr("192.0.2.1")); got != netip.MustParseAddr("192.0.2.1") {
		t.Errorf("no nas_ip: the session's NAS address is %v; want the Called one", got)
	}
}
