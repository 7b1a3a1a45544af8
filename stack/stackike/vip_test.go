package stackike

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/ikenode"
	"github.com/ipsecd/ipsecd/internal/dnstest"
)

// roadWarrior is a road warrior's sidecar config: no address of its
// own, vips: [0.0.0.0], a child to behind, the gateway at gw.
type roadWarrior struct {
	self, gw         netip.Addr
	behind, id, gwID string
	psk              string
}

func roadWarriorConfig(t testing.TB, r roadWarrior) *config.Config {
	t.Helper()
	return parse(t, fmt.Sprintf(`state_dir: %s
underlay: {udp: "%s:4500"}
interfaces:
  - {name: rw, if_id: 1, routes: [%[4]s]}
connections:
  - name: rw
    remote_addrs: [%[3]s]
    vips: [0.0.0.0]
    proposals: [aes256-sha256-x25519]
    local: {auth: psk, id: %[5]s}
    remote: {auth: psk, id: %[6]s}
    children:
      - {name: net, if_id: 1, local_ts: [dynamic], remote_ts: [%[4]s], esp_proposals: [aes128gcm16]}
secrets:
  - {ids: [%[5]s, %[6]s], secret: "%[7]s"}
`, filepath.Join(t.TempDir(), "state"), r.self, r.gw, r.behind, r.id, r.gwID, r.psk))
}

// gatewayConfig is a remote-access gateway on a netstack: the pool
// 10.3.0.0/24 with the DNS server 10.4.0.53, which is the gateway
// netstack's own address beside 10.4.0.1.
func gatewayConfig(t testing.TB, self netip.Addr, psk string) *config.Config {
	t.Helper()
	return parse(t, fmt.Sprintf(`state_dir: %s
underlay: {udp: "%s:4500"}
interfaces:
  - {name: gw, if_id: 1, addresses: [10.4.0.1/24, 10.4.0.53/32], routes: [10.3.0.0/24]}
pools:
  - {name: rw, addrs: 10.3.0.0/24, dns: [10.4.0.53], dns_domains: [corp.example]}
connections:
  - name: rw
    remote_addrs: ["%%any"]
    pools: [rw]
    proposals: [aes256-sha256-x25519]
    local: {auth: psk, id: vpn.corp.example}
    remote: {auth: psk, id: alice@corp.example}
    children:
      - {name: rw-net, if_id: 1, local_ts: [10.4.0.0/24], remote_ts: [dynamic], esp_proposals: [aes128gcm16]}
secrets:
  - {ids: [alice@corp.example, vpn.corp.example], secret: "%s"}
`, filepath.Join(t.TempDir(), "state"), self, psk))
}

func parse(t testing.TB, text string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("test config", []byte(text))
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	return cfg
}

// waitVIP waits settleWait at most for n's virtual IP, asked for at
// start.
func waitVIP(t *testing.T, n *Net, start time.Time) netip.Addr {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), settleWait)
	defer cancel()
	vips, err := n.WaitVirtualIP(ctx)
	if err != nil {
		list, _ := n.List()
		t.Fatalf("%v\nSAs: %+v", err, list)
	}
	t.Logf("virtual IP %v, DNS %v, %v after Initiate", vips, n.DNS(), time.Since(start).Round(time.Millisecond))
	if len(vips) != 1 {
		t.Fatalf("virtual IPs %v, want one", vips)
	}
	return vips[0]
}

// TestRoadWarrior: a sidecar with no address of its own asks a gateway
// (another sidecar with a pool) for one; the netstack takes 10.3.0.1 and
// the DNS server 10.4.0.53, a checksummed TCP stream goes from it to
// 10.4.0.1 behind the gateway, which sees the virtual IP as its source,
// and Resolver resolves a name at the gateway's DNS server through the
// tunnel. When the IKE SA goes the address goes with it; on reconnect
// the gateway gives the same one back.
func TestRoadWarrior(t *testing.T) {
	la, lb := loopbackPair(t)
	k := make([]byte, 32)
	crand.Read(k)
	psk := "0x" + hex.EncodeToString(k)
	gw, err := New(Config{File: gatewayConfig(t, lb, psk)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	rw, err := New(Config{File: roadWarriorConfig(t, roadWarrior{self: la, gw: lb, behind: "10.4.0.0/24",
		id: "alice@corp.example", gwID: "vpn.corp.example", psk: psk})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rw.Close() })
	vip := netip.MustParseAddr("10.3.0.1")
	if holds(rw, vip) {
		t.Fatalf("the road warrior's netstack holds %v before IKE", vip)
	}
	serveDNS(t, gw, "intranet.corp.example.", netip.MustParseAddr("10.4.0.80"))

	start := time.Now()
	if err := rw.Initiate(ikenode.Target{IKE: "rw"}); err != nil {
		t.Fatal(err)
	}
	if got := waitVIP(t, rw, start); got != vip || fmt.Sprint(rw.DNS()) != "[10.4.0.53]" || !holds(rw, vip) {
		t.Fatalf("virtual IP %v DNS %v (netstack holds it: %v), want 10.3.0.1 and 10.4.0.53 from the pool", got, rw.DNS(), holds(rw, vip))
	}
	streamFromVIP(t, rw, gw, 8<<20)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addrs, err := rw.Resolver().LookupNetIP(ctx, "ip4", "intranet.corp.example")
	if err != nil || fmt.Sprint(addrs) != "[10.4.0.80]" {
		t.Errorf("Resolver: intranet.corp.example: %v %v, want 10.4.0.80 from the gateway's DNS server", addrs, err)
	}

	// Down: the address goes; up again: the same lease.
	if err := rw.Terminate(ikenode.Target{IKE: "rw"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(settleWait)
	for len(rw.VirtualIPs()) > 0 || holds(rw, vip) {
		if time.Now().After(deadline) {
			list, _ := rw.List()
			t.Fatalf("after the IKE SA went: virtual IPs %v, netstack holds %v: %v\nSAs: %+v", rw.VirtualIPs(), vip, holds(rw, vip), list)
		}
		time.Sleep(5 * time.Millisecond)
	}
	start = time.Now()
	if err := rw.Initiate(ikenode.Target{IKE: "rw"}); err != nil {
		t.Fatal(err)
	}
	if again := waitVIP(t, rw, start); again != vip || !holds(rw, vip) {
		t.Errorf("reconnected with %v (netstack holds it: %v), want the lease %v back", again, holds(rw, vip), vip)
	}
}

// holds reports whether a is one of n's addresses: only then can a
// socket be bound to it.
func holds(n *Net, a netip.Addr) bool {
	c, err := n.ListenUDP(&net.UDPAddr{IP: a.AsSlice()})
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// streamFromVIP sends a checksummed TCP stream of size bytes from rw to
// 10.4.0.1:5201 on gw, whose server must see rw's virtual IP 10.3.0.1
// as the source.
func streamFromVIP(t *testing.T, rw, gw *Net, size int64) {
	t.Helper()
	streamFromVIPTo(t, rw, gw, "10.4.0.1", size)
}

// streamFromVIPTo is streamFromVIP with rw dialing host, an address or a
// name that rw resolves to 10.4.0.1.
func streamFromVIPTo(t *testing.T, rw, gw *Net, host string, size int64) {
	t.Helper()
	ln, err := gw.ListenTCP(&net.TCPAddr{IP: net.ParseIP("10.4.0.1"), Port: 5201})
	if err != nil {
		t.Fatal(err)
	}
	from := make(chan net.Addr, 1)
	err = stream(sourceOf(ln, from), func(ctx context.Context) (net.Conn, error) {
		return rw.DialContext(ctx, "tcp", net.JoinHostPort(host, "5201"))
	}, size, nil)
	if err != nil {
		t.Fatalf("TCP road warrior → %s (10.4.0.1) behind the gateway: %v", host, err)
	}
	if src := (<-from).(*net.TCPAddr).IP.String(); src != "10.3.0.1" {
		t.Errorf("the gateway's server saw the stream from %s, want the virtual IP 10.3.0.1", src)
	}
}

// sourceOf is ln whose first accepted connection's remote address goes
// to from.
func sourceOf(ln net.Listener, from chan<- net.Addr) net.Listener {
	return &sourceListener{Listener: ln, from: from}
}

type sourceListener struct {
	net.Listener
	from chan<- net.Addr
}

func (l *sourceListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		select {
		case l.from <- c.RemoteAddr():
		default:
		}
	}
	return c, err
}

// serveDNS answers A queries for name with addr at 10.4.0.53:53 on the
// gateway's netstack (UDP), until the test ends.
func serveDNS(t *testing.T, gw *Net, name string, addr netip.Addr) {
	t.Helper()
	c, err := gw.ListenUDP(&net.UDPAddr{IP: net.ParseIP("10.4.0.53"), Port: 53})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go dnstest.Serve(c, map[string]netip.Addr{name: addr})
}
