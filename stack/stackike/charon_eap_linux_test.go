package stackike

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/internal/charontest"
	"github.com/ipsecd/ipsecd/internal/dnstest"
)

// charonEAPGateway is swanctl.conf for charon 5.9.8 as a remote-access
// gateway at 192.0.2.1: a.test by the certificate of pki, EAP-MSCHAPv2
// for any user (alice's password), pools of IPv4 and IPv6 addresses
// with a DNS server each, 198.51.100.0/24 and 2001:db8:4::/64 behind.
func charonEAPGateway(pki charontest.GatewayPKI) string {
	return charontest.Conn{LocalAddrs: "192.0.2.1", Proposals: "aes256-sha256-x25519", Encap: true,
		Local: charontest.Peer{Auth: "pubkey", ID: "a.test", Certs: pki.Cert}, Remote: charontest.Peer{Auth: "eap-mschapv2", EAPID: "%any"},
		Pools: "rw4, rw6", PoolsConf: "pools {\n  rw4 {\n    addrs = 10.3.0.0/24\n    dns = 198.51.100.53\n  }\n" +
			"  rw6 {\n    addrs = 2001:db8:3::/120\n    dns = 2001:db8:4::53\n  }\n}\n",
		LocalTS: "198.51.100.0/24, 2001:db8:4::/64", RemoteTS: "dynamic", ESP: "aes128gcm16"}.String() +
		"secrets {\n  eap-alice {\n    id = alice\n    secret = \"alice-mschapv2-pw\"\n  }\n}\n"
}

// eapRoadWarrior is the sidecar's connection to charonEAPGateway, given
// from the program, with its underlay socket at local.
func eapRoadWarrior(pki charontest.GatewayPKI, local, password string) *RoadWarrior {
	return &RoadWarrior{Gateway: netip.MustParseAddr("192.0.2.1"), GatewayID: "a.test", CA: pki.CA,
		User: "alice", Password: []byte(password), Local: netip.MustParseAddr(local), IPv6: true,
		Networks: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("2001:db8:4::/64")}}
}

// TestCharonGatewayEAP: the sidecar as a road warrior of charon (5.9.8)
// with EAP-MSCHAPv2, its connection given from the program
// (RoadWarrior): it checks the gateway's certificate against the CA,
// logs in as alice, and takes an IPv4 and an IPv6 virtual IP at once
// with a DNS server each; charon lists alice with both. A checksummed
// TCP stream goes from each virtual IP to the network behind charon,
// whose server sees the virtual IP as the source, the second to a name
// that DialContext resolves through the tunnel at the DNS server charon
// gave. With a wrong password no address comes, WaitVirtualIP says at
// once that the authentication failed, and the login is not tried again.
func TestCharonGatewayEAP(t *testing.T) {
	ch, nsC, nsS := charonNamespaces(t)
	nsC.IP(t, "addr", "add", "198.51.100.53/32", "dev", "lo")
	nsC.IP(t, "addr", "add", "2001:db8:4::1/128", "dev", "lo")
	nsC.IP(t, "addr", "add", "2001:db8:4::53/128", "dev", "lo")
	nsS.IP(t, "addr", "add", "192.0.2.3/24", "dev", "vs")
	pki := charontest.WriteGatewayPKI(t, t.TempDir(), "a.test")
	ch.LoadDir(charonEAPGateway(pki), pki.Dir)
	var dns net.PacketConn
	if err := nsC.Do(func() (err error) { dns, err = net.ListenPacket("udp", "198.51.100.53:53"); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dns.Close() })
	go dnstest.Serve(dns, map[string]netip.Addr{"intranet6.corp.example.": netip.MustParseAddr("2001:db8:4::1")})

	t.Run("wrong password", func(t *testing.T) {
		n := sidecarIn(t, nsS, Config{RoadWarrior: eapRoadWarrior(pki, "192.0.2.3", "not-alices-password")})
		ctx, cancel := context.WithTimeout(context.Background(), settleWait)
		defer cancel()
		vips, err := n.WaitVirtualIP(ctx)
		if err == nil || !strings.Contains(err.Error(), "authentication failed") || ctx.Err() != nil || strings.Contains(err.Error(), "not-alices-password") {
			t.Fatalf("WaitVirtualIP: %v %v; want no address and, at once, an error saying the authentication failed, without the password", vips, err)
		}
		t.Logf("WaitVirtualIP: %v", err)
		// The daemon's first retry would come 5 s after the failure.
		time.Sleep(8 * time.Second)
		if logins := strings.Count(ch.LogSince(0), "192.0.2.3 is initiating an IKE_SA"); logins != 1 {
			t.Errorf("charon saw %d logins from the road warrior with the wrong password, want 1: an authentication failure is not retried", logins)
		}
	})

	n := sidecarIn(t, nsS, Config{RoadWarrior: eapRoadWarrior(pki, "192.0.2.2", "alice-mschapv2-pw")})
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), settleWait)
	defer cancel()
	vips, err := n.WaitVirtualIP(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("virtual IPs %v, DNS %v, %v after New", vips, n.DNS(), time.Since(start).Round(time.Millisecond))
	if fmt.Sprint(vips, n.DNS()) != "[10.3.0.1 2001:db8:3::1] [198.51.100.53 2001:db8:4::53]" {
		t.Fatalf("virtual IPs %v DNS %v, want 10.3.0.1 and 2001:db8:3::1, DNS 198.51.100.53 and 2001:db8:4::53 from charon's pools", vips, n.DNS())
	}
	for _, v := range vips {
		if !holds(n, v) {
			t.Errorf("the netstack does not hold %v", v)
		}
	}
	list, _ := ch.Swanctl("--list-sas", "--raw")
	// alice is both the IKE identity and the EAP one: charon lists no
	// remote-eap-id apart.
	if !strings.Contains(list, "remote-id=alice") || !strings.Contains(list, "remote-vips=[10.3.0.1 2001:db8:3::1]") {
		t.Errorf("charon does not list alice with both virtual IPs:\n%s", list)
	}
	if log := ch.LogSince(0); !strings.Contains(log, "EAP method EAP_MSCHAPV2 succeeded, MSK established") {
		t.Errorf("charon's log does not say EAP-MSCHAPv2 succeeded with an MSK")
	}

	for _, c := range []struct{ listen, dial, from string }{
		{"198.51.100.1:5201", "198.51.100.1:5201", "10.3.0.1"},
		{"[2001:db8:4::1]:5202", "intranet6.corp.example:5202", "2001:db8:3::1"},
	} {
		var ln net.Listener
		if err := nsC.Do(func() (err error) { ln, err = net.Listen("tcp", c.listen); return err }); err != nil {
			t.Fatal(err)
		}
		from := make(chan net.Addr, 1)
		begin := time.Now()
		err := stream(sourceOf(ln, from), func(ctx context.Context) (net.Conn, error) {
			return n.DialContext(ctx, "tcp", c.dial)
		}, 4<<20, nil)
		if err != nil {
			t.Fatalf("TCP virtual IP → %s behind charon: %v", c.dial, err)
		}
		if src := (<-from).(*net.TCPAddr).IP.String(); src != c.from {
			t.Errorf("charon's side saw the stream to %s from %s, want the virtual IP %s", c.dial, src, c.from)
		}
		t.Logf("4 MiB to %s from %s in %v", c.dial, c.from, time.Since(begin).Round(time.Millisecond))
	}
}
