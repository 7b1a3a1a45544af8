package stack

import (
	"context"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/sa"
)

// TestDialRefusesBadAddresses: DialContext takes tcp/udp with 4 or 6 and
// a literal ip:port, and says which part is wrong otherwise.
func TestDialRefusesBadAddresses(t *testing.T) {
	p := startPair(t, pairSpec{suite: suites[0], mode: sa.ModeTunnel, outer: lo4, inner: doc4})
	tests := []struct {
		network, address, want string
	}{
		{"sctp", "192.0.2.2:80", `network "sctp"`},
		{"tcp", "example.com:80", "no names are resolved"},
		{"tcp", "192.0.2.2", "want ip:port"},
		{"tcp6", "192.0.2.2:80", "not IPv6"},
		{"udp4", "[2001:db8::2]:80", "not IPv4"},
		{"tcp", "0.0.0.0:80", "want a destination"},
		{"udp", "192.0.2.2:0", "want a destination"},
	}
	for _, tt := range tests {
		c, err := p.nets[0].Dial(tt.network, tt.address)
		if err == nil {
			c.Close()
			t.Errorf("Dial(%q, %q) succeeded", tt.network, tt.address)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Dial(%q, %q): %v; want an error saying %q", tt.network, tt.address, err, tt.want)
		}
	}
}

// TestDialRefused: a TCP dial to a port nobody listens on fails at once
// (the peer's RST comes back through ESP), and one to an address with no
// route (outside Routes) fails with no packet sent.
func TestDialRefused(t *testing.T) {
	p := startPair(t, pairSpec{suite: suites[0], mode: sa.ModeTunnel, outer: lo4, inner: doc4})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if c, err := p.nets[0].DialContext(ctx, "tcp", "192.0.2.2:9"); err == nil || !strings.Contains(err.Error(), "refused") {
		if c != nil {
			c.Close()
		}
		t.Fatalf("dial to a closed port: %v, want connection refused", err)
	}
	n, err := New(Config{
		EphemeralKeys: true,
		Underlay:      netip.MustParseAddrPort("127.0.0.1:0"),
		Addresses:     []netip.Prefix{netip.MustParsePrefix("192.0.2.1/32")},
		Routes:        []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if c, err := n.DialContext(ctx, "tcp", "203.0.113.9:80"); err == nil {
		c.Close()
		t.Fatal("dial outside Routes succeeded")
	} else if !strings.Contains(err.Error(), "no route") {
		t.Fatalf("dial outside Routes: %v, want no route to host", err)
	}
	if st := n.Interface().Stats(); st.TxPackets != 0 {
		t.Fatalf("%d packets sent for a destination outside Routes, want 0", st.TxPackets)
	}
}

// TestListenAnyAddress: a listener on no address (nil) takes IPv4
// connections too (netstack's IPv6 endpoints are dual-stack), and its
// port is what the caller asked for.
func TestListenAnyAddress(t *testing.T) {
	p := startPair(t, pairSpec{suite: suites[0], mode: sa.ModeTunnel, outer: lo4, inner: doc4})
	ln, err := p.nets[1].ListenTCP(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	if port == 0 {
		t.Fatal("listener on port 0 has no port")
	}
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Write([]byte("hello"))
		c.Close()
	}()
	c, err := p.nets[0].Dial("tcp4", netip.AddrPortFrom(doc4[1], uint16(port)).String())
	if err != nil {
		t.Fatalf("dial the any-address listener over IPv4: %v", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "hello" {
		t.Fatalf("read %q, %v; want hello", got, err)
	}
}
