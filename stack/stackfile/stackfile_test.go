package stackfile

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/stack"
)

// sideYAML is one side of a tunnel as a daemon config file: tunnel mode,
// AES-GCM-128, ESP in UDP between the two loopback addresses.
func sideYAML(self, peer netip.AddrPort, inner, remote string, outSPI, inSPI uint32, outKey, inKey, extra string) string {
	return fmt.Sprintf(`underlay:
  udp: %v
%sinterfaces:
  - name: app
    if_id: 7
    mtu: 1400
    addresses: [%s]
    routes: [%s]
states:
  - {src: %v, dst: %v, spi: %#x, dir: out, mode: tunnel, if_id: 7,
     aead: {name: "rfc4106(gcm(aes))", key: "%s", icv_bits: 128},
     encap: {type: espinudp, sport: %d, dport: %d}}
  - {src: %v, dst: %v, spi: %#x, dir: in, mode: tunnel, if_id: 7,
     aead: {name: "rfc4106(gcm(aes))", key: "%s", icv_bits: 128},
     encap: {type: espinudp, sport: %d, dport: %d}, replay_window: 128}
`, self, extra, inner, remote,
		self.Addr(), peer.Addr(), outSPI, outKey, self.Port(), peer.Port(),
		peer.Addr(), self.Addr(), inSPI, inKey, peer.Port(), self.Port())
}

// TestNew brings a tunnel up from two daemon config files (the
// if_id, addresses, routes, MTU, states and underlay.udp come from them)
// and carries TCP and UDP over it.
func TestNew(t *testing.T) {
	const k1, k2 = "0x000102030405060708090a0b0c0d0e0f10111213", "0x202122232425262728292a2b2c2d2e2f30313233"
	a := freeUDPPortOn(t, netip.MustParseAddr("127.0.0.1"))
	b := freeUDPPortOn(t, netip.MustParseAddr("127.0.0.2"))
	files := []string{
		sideYAML(a, b, "198.51.100.1/24", "203.0.113.0/24", 0x2001, 0x2002, k1, k2, ""),
		sideYAML(b, a, "203.0.113.1/24", "198.51.100.0/24", 0x2002, 0x2001, k2, k1, ""),
	}
	var nets [2]*stack.Net
	for i, f := range files {
		c, err := config.Parse(fmt.Sprintf("side%d.yaml", i), []byte("state_dir: "+filepath.Join(t.TempDir(), "state")+"\n"+f))
		if err != nil {
			t.Fatalf("config.Parse:\n%s\n%v", f, err)
		}
		n, err := New(c)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		t.Cleanup(func() { n.Close() })
		nets[i] = n
		if got := n.Interface().IfID(); got != 7 {
			t.Fatalf("if_id %d, want 7 from the file", got)
		}
		if got, want := n.Interface().Name(), c.Interfaces[0].Name; got != want {
			t.Fatalf("interface %q, want %q from the file", got, want)
		}
		if got := len(n.SAD().States()); got != 2 {
			t.Fatalf("%d states, want 2 from the file", got)
		}
	}
	echoTCP(t, nets[0], nets[1], netip.MustParseAddr("203.0.113.1"), 1<<20, 60*time.Second)
}

// TestNewRefuses: a file that cannot be a netstack's is refused,
// naming the file and the key.
func TestNewRefuses(t *testing.T) {
	a, b := netip.MustParseAddrPort("127.0.0.1:4500"), netip.MustParseAddrPort("127.0.0.2:4500")
	one := sideYAML(a, b, "198.51.100.1/24", "203.0.113.0/24", 0x2001, 0x2002, "0x"+strings.Repeat("11", 20), "0x"+strings.Repeat("22", 20), "")
	two := strings.Replace(one, "states:", `  - {name: other, if_id: 8, addresses: [192.0.2.1/24]}
states:`, 1)
	tests := []struct {
		name, file, want string
	}{
		{"two interfaces", two, "interfaces: 2, want exactly one"},
		{"raw esp", sideYAML(a, b, "198.51.100.1/24", "203.0.113.0/24", 0x2001, 0x2002, "0x"+strings.Repeat("11", 20), "0x"+strings.Repeat("22", 20), "  raw_esp: true\n"), "underlay.raw_esp"},
		{"mark", sideYAML(a, b, "198.51.100.1/24", "203.0.113.0/24", 0x2001, 0x2002, "0x"+strings.Repeat("11", 20), "0x"+strings.Repeat("22", 20), "  mark: 0x100\n"), "underlay.mark"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := config.Parse("bad.yaml", []byte("state_dir: "+t.TempDir()+"\n"+tt.file))
			if err != nil {
				t.Fatalf("config.Parse: %v", err)
			}
			n, err := New(c)
			if err == nil {
				n.Close()
				t.Fatal("New accepted it")
			}
			if !strings.Contains(err.Error(), "bad.yaml") || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, stack.ErrInvalidConfig) {
				t.Fatalf("error %q: want one naming bad.yaml and %q, wrapping ErrInvalidConfig", err, tt.want)
			}
		})
	}
}

// echoTCP dials from a to b's addr through the tunnel, sends size random
// bytes that b echoes, and checks that they come back whole within
// timeout.
func echoTCP(t *testing.T, a, b *stack.Net, addr netip.Addr, size int, timeout time.Duration) {
	t.Helper()
	ln, err := b.ListenTCP(&net.TCPAddr{IP: addr.AsSlice(), Port: 5001})
	if err != nil {
		t.Fatalf("ListenTCP: %v", err)
	}
	defer ln.Close()
	deadline := time.Now().Add(timeout)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(deadline)
		io.Copy(c, c)
	}()
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	c, err := a.DialContext(ctx, "tcp", netip.AddrPortFrom(addr, 5001).String())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	c.SetDeadline(deadline)
	sent := make([]byte, size)
	rand.Read(sent)
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(sent)
		werr <- err
	}()
	got := make([]byte, size)
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("echo: %v", err)
	}
	if err := <-werr; err != nil {
		t.Fatalf("write: %v", err)
	}
	if !bytes.Equal(got, sent) {
		t.Fatalf("echo: %d bytes came back different", size)
	}
}

// freeUDPPortOn returns addr with a UDP port that was free a moment ago.
func freeUDPPortOn(t *testing.T, addr netip.Addr) netip.AddrPort {
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, 0)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).AddrPort()
}
