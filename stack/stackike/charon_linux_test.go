package stackike

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/ikenode"
	"github.com/ipsecd/ipsecd/internal/charontest"
	"github.com/ipsecd/ipsecd/tun/netnstest"
)

// TestCharon: a sidecar against strongSwan's charon (5.9.8, with
// kernel-libipsec) in a network namespace. The sidecar's underlay socket
// is bound in a second namespace joined to charon's by a veth pair (the
// netstack and the IKE goroutine stay in the test's), at 192.0.2.2:4500;
// charon is at 192.0.2.1 with 198.51.100.1 behind it. The sidecar
// initiates on port 4500 from its first message, a checksummed TCP
// stream goes each way between the netstack and a socket in charon's
// namespace, with the child rekeyed by the sidecar in the middle of the
// first and by charon in the middle of the second.
func TestCharon(t *testing.T) {
	ch, nsC, n := charonAndSidecar(t)
	ch.Load(charontest.Conn{LocalAddrs: "192.0.2.1", RemoteAddrs: "192.0.2.2", Proposals: "aes128gcm16-prfsha256-x25519", Encap: true,
		Local: charontest.Peer{ID: "a.test"}, Remote: charontest.Peer{ID: "b.test"},
		LocalTS: "198.51.100.0/24", RemoteTS: "203.0.113.0/24", ESP: "aes128gcm16-x25519"}.String())

	if err := n.Initiate(ikenode.Target{IKE: "t"}); err != nil {
		t.Fatal(err)
	}
	before, err := waitOne(n, anySA)
	if err != nil {
		t.Fatal(err)
	}
	list, _ := ch.Swanctl("--list-sas")
	if !strings.Contains(list, before.SPIInitiator+"_i") || !strings.Contains(list, "INSTALLED") {
		t.Fatalf("charon does not list the sidecar's IKE SA %s_i with a child:\n%s", before.SPIInitiator, list)
	}

	const size = 8 << 20
	rekeyedFrom := func(old control.IKESAInfo) func(control.IKESAInfo) bool {
		return func(s control.IKESAInfo) bool { return s.Children[0].SPIIn != old.Children[0].SPIIn }
	}
	// Sidecar → charon's namespace, the sidecar rekeying.
	var ln net.Listener
	if err := nsC.Do(func() (err error) { ln, err = net.Listen("tcp", "198.51.100.1:5201"); return err }); err != nil {
		t.Fatal(err)
	}
	err = stream(ln, func(ctx context.Context) (net.Conn, error) { return n.DialContext(ctx, "tcp", "198.51.100.1:5201") }, size, func() error {
		if err := n.Rekey(ikenode.Target{Child: "net"}); err != nil {
			return err
		}
		_, err := waitOne(n, rekeyedFrom(before))
		return err
	})
	if err != nil {
		t.Fatalf("TCP sidecar → charon across the sidecar's child rekey: %v", err)
	}
	mid, err := waitOne(n, anySA)
	if err != nil {
		t.Fatal(err)
	}
	// Charon's namespace → sidecar, charon rekeying.
	ln, err = n.ListenTCP(&net.TCPAddr{IP: net.ParseIP("203.0.113.1"), Port: 5201})
	if err != nil {
		t.Fatal(err)
	}
	err = stream(ln, dialFrom(nsC), size, func() error {
		if out, err := ch.Swanctl("--rekey", "--child", "net"); err != nil {
			t.Logf("swanctl --rekey: %s", out)
			return err
		}
		_, err := waitOne(n, rekeyedFrom(mid))
		return err
	})
	if err != nil {
		t.Fatalf("TCP charon → sidecar across charon's child rekey: %v", err)
	}
	after, err := waitOne(n, anySA)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("child SPIs %s_i %s_o → %s_i %s_o → %s_i %s_o", before.Children[0].SPIIn, before.Children[0].SPIOut,
		mid.Children[0].SPIIn, mid.Children[0].SPIOut, after.Children[0].SPIIn, after.Children[0].SPIOut)
	n.Counters().Each(func(counter string, v uint64) {
		if v != 0 && strings.HasPrefix(counter, "Xfrm") {
			t.Errorf("sidecar: %s %d, want 0: a packet was dropped", counter, v)
		}
	})
}

// charonAndSidecar starts charon in a namespace of its own at 192.0.2.1,
// with 198.51.100.1 behind it, and a sidecar (b.test, 203.0.113.1/24,
// start_action none) whose underlay socket is bound at 192.0.2.2:4500 in
// a second namespace joined to charon's by a veth pair; the netstack and
// the IKE goroutine stay in the test's. It skips the test without root
// or strongSwan.
func charonAndSidecar(t *testing.T) (*charontest.Charon, *netnstest.NS, *Net) {
	ch, nsC, nsS := charonNamespaces(t)
	e := endpoint{underlay: netip.MustParseAddr("192.0.2.2"), peer: netip.MustParseAddr("192.0.2.1"), inner: "203.0.113.1",
		subnet: "203.0.113.0/24", remote: "198.51.100.0/24", id: "b.test", peerID: "a.test"}
	return ch, nsC, sidecarIn(t, nsS, Config{File: pairConfig(t, e, charontest.PSK)})
}

// charonNamespaces starts charon in a namespace of its own at 192.0.2.1,
// with 198.51.100.1 behind it, and returns it with a second namespace
// joined to charon's by a veth pair, where 192.0.2.2 is the sidecar's
// underlay address.
func charonNamespaces(t *testing.T) (ch *charontest.Charon, nsC, nsS *netnstest.NS) {
	charontest.Require(t)
	nsC, nsS = charontest.Namespaces(t, "stackike", "198.51.100.1/32")
	return charontest.Start(t, nsC.Name, ""), nsC, nsS
}

// sidecarIn is New(cfg) with its underlay socket bound in ns.
func sidecarIn(t *testing.T, ns *netnstest.NS, cfg Config) *Net {
	var n *Net
	if err := ns.Do(func() (err error) {
		n, err = New(cfg)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// dialFrom dials from 198.51.100.1 in charon's namespace ns, through
// charon's tunnel.
func dialFrom(ns *netnstest.NS) func(context.Context) (net.Conn, error) {
	return func(ctx context.Context) (c net.Conn, err error) {
		err = ns.Do(func() (err error) {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("198.51.100.1")}}
			c, err = d.DialContext(ctx, "tcp", "203.0.113.1:5201")
			return err
		})
		return c, err
	}
}

// waitOne waits until n alone is settled and done holds for its SA.
func waitOne(n *Net, done func(control.IKESAInfo) bool) (control.IKESAInfo, error) {
	return waitSettled(n, n, "the sidecar's SAs", func(s, _ control.IKESAInfo) bool { return done(s) })
}

func anySA(control.IKESAInfo) bool { return true }

// TestCharonInitiates: charon initiates to the sidecar, which binds no
// port 500: with local_port and remote_port 4500 charon sends its
// IKE_SA_INIT from and to port 4500, after the non-ESP marker, and the
// sidecar answers; a checksummed stream then goes from charon's
// namespace to the netstack. (With remote_port alone charon sends from
// port 500 without the marker, which the sidecar's ESP socket takes for
// ESP of an unknown SPI and drops.)
func TestCharonInitiates(t *testing.T) {
	ch, nsC, n := charonAndSidecar(t)
	conf := charontest.Conn{LocalAddrs: "192.0.2.1", RemoteAddrs: "192.0.2.2", Proposals: "aes128gcm16-prfsha256-x25519", Encap: true,
		Local: charontest.Peer{ID: "a.test"}, Remote: charontest.Peer{ID: "b.test"},
		LocalTS: "198.51.100.0/24", RemoteTS: "203.0.113.0/24", ESP: "aes128gcm16-x25519"}.String()
	conf = strings.Replace(conf, "    remote_addrs = 192.0.2.2\n", "    remote_addrs = 192.0.2.2\n    local_port = 4500\n    remote_port = 4500\n", 1)
	if !strings.Contains(conf, "remote_port = 4500") {
		t.Fatalf("no remote_addrs line to add remote_port after:\n%s", conf)
	}
	ch.Load(conf)
	if out, err := ch.Swanctl("--initiate", "--child", "net"); err != nil {
		t.Fatalf("swanctl --initiate: %v\n%s", err, out)
	}
	s, err := waitOne(n, anySA)
	if err != nil {
		t.Fatal(err)
	}
	if s.Initiator {
		t.Errorf("the sidecar lists itself as the initiator of charon's IKE SA: %+v", s)
	}
	ln, err := n.ListenTCP(&net.TCPAddr{IP: net.ParseIP("203.0.113.1"), Port: 5201})
	if err != nil {
		t.Fatal(err)
	}
	if err := stream(ln, dialFrom(nsC), 4<<20, nil); err != nil {
		t.Fatalf("TCP charon → sidecar: %v", err)
	}
}

// TestCharonGateway: the sidecar as a road warrior of charon (5.9.8) as
// the gateway, with a pool of 10.3.0.0/24 and the DNS server 10.3.0.53:
// the netstack, with no address of its own, takes 10.3.0.1 and the DNS
// server, and a checksummed TCP stream goes from the virtual IP to
// 198.51.100.1 behind charon, whose server sees 10.3.0.1 as the source.
func TestCharonGateway(t *testing.T) {
	ch, nsC, nsS := charonNamespaces(t)
	ch.Load(charontest.Conn{LocalAddrs: "192.0.2.1", Proposals: "aes256-sha256-x25519", Encap: true,
		Local: charontest.Peer{ID: "a.test"}, Remote: charontest.Peer{ID: "b.test"},
		Pools: "rw", PoolsConf: "pools {\n  rw {\n    addrs = 10.3.0.0/24\n    dns = 10.3.0.53\n  }\n}\n",
		LocalTS: "198.51.100.0/24", RemoteTS: "dynamic", ESP: "aes128gcm16"}.String())
	n := sidecarIn(t, nsS, Config{File: roadWarriorConfig(t, roadWarrior{self: netip.MustParseAddr("192.0.2.2"), gw: netip.MustParseAddr("192.0.2.1"),
		behind: "198.51.100.0/24", id: "b.test", gwID: "a.test", psk: charontest.PSK})})
	start := time.Now()
	if err := n.Initiate(ikenode.Target{IKE: "rw"}); err != nil {
		t.Fatal(err)
	}
	vip := waitVIP(t, n, start)
	if vip.String() != "10.3.0.1" || fmt.Sprint(n.DNS()) != "[10.3.0.53]" || !holds(n, vip) {
		t.Fatalf("virtual IP %v DNS %v (netstack holds it: %v), want 10.3.0.1 and 10.3.0.53 from charon's pool", vip, n.DNS(), holds(n, vip))
	}
	if list, _ := ch.Swanctl("--list-sas", "--raw"); !strings.Contains(list, "remote-vips=[10.3.0.1]") {
		t.Errorf("charon does not list the sidecar's virtual IP:\n%s", list)
	}
	var ln net.Listener
	if err := nsC.Do(func() (err error) { ln, err = net.Listen("tcp", "198.51.100.1:5201"); return err }); err != nil {
		t.Fatal(err)
	}
	from := make(chan net.Addr, 1)
	err := stream(sourceOf(ln, from), func(ctx context.Context) (net.Conn, error) {
		return n.DialContext(ctx, "tcp", "198.51.100.1:5201")
	}, 8<<20, nil)
	if err != nil {
		t.Fatalf("TCP virtual IP → 198.51.100.1 behind charon: %v", err)
	}
	if src := (<-from).(*net.TCPAddr).IP.String(); src != "10.3.0.1" {
		t.Errorf("charon's side saw the stream from %s, want the virtual IP 10.3.0.1", src)
	}
}
