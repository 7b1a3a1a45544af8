//go:build linux

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/internal/charontest"
)

// md5DualStackGateway is raGateway with remote auth eap-md5 and a second
// pool of IPv6 addresses (fd00:3::/120, its DNS server fd00:3::53) beside
// the IPv4 one: the network behind the gateway is 198.51.100.0/24 and
// 2001:db8:cafe::/64, both on its interface.
func md5DualStackGateway(cert, key string) string {
	cfg := raGateway(cert, key)
	for _, r := range [][2]string{
		{"addresses: [198.51.100.1/24], routes: [10.3.0.0/24]", `addresses: [198.51.100.1/24, "2001:db8:cafe::1/64"], routes: [10.3.0.0/24, "fd00:3::/120"]`},
		{"dns_domains: [corp.example]}\n", "dns_domains: [corp.example]}\n  - {name: rw6, addrs: \"fd00:3::/120\", dns: [\"fd00:3::53\"]}\n"},
		{"pools: [rw]", "pools: [rw, rw6]"},
		{"remote: {auth: eap-mschapv2}", "remote: {auth: eap-md5}"},
		{"local_ts: [198.51.100.0/24]", `local_ts: [198.51.100.0/24, "2001:db8:cafe::/64"]`},
	} {
		if !strings.Contains(cfg, r[0]) {
			panic("md5DualStackGateway: raGateway lacks " + r[0])
		}
		cfg = strings.Replace(cfg, r[0], r[1], 1)
	}
	return cfg
}

// TestIKECharonEAPMD5DualStack: charon 5.9.8 (kernel-libipsec) logs in to
// the real binary's gateway with EAP-MD5 (no MSK: both AUTHs keyed by
// SK_pi/SK_pr) and asks for an address of each family: it gets 10.3.0.1
// and fd00:3::1 with a DNS server of each family, which its log shows it
// received, and pings and sends a checksummed TCP stream from each
// virtual IP to the gateway's side of the network behind it. ike list
// and pool list show both addresses; a reconnect gets both back.
func TestIKECharonEAPMD5DualStack(t *testing.T) {
	charontest.Require(t)
	p := newPair(t)
	caFile, cert, key := raPKI(t, t.TempDir())
	rw := newRoadWarrior(t, p.b, underlayB4, "alice", "alice-mschapv2-pw", caFile)
	rw.conn.Local.Auth = "eap-md5"
	rw.conn.VIPs, rw.conn.RemoteTS = "0.0.0.0, ::", "198.51.100.0/24, 2001:db8:cafe::/64"
	rw.ch.LoadDir(rw.conn.String(), rw.dir)
	d := startDaemon(t, p.a, md5DualStackGateway(cert, key))

	for _, what := range []string{"first connect", "reconnect"} {
		from := rw.ch.LogSize()
		if out, err := rw.ch.Swanctl("--initiate", "--child", "net", "--timeout", "15"); err != nil {
			t.Fatalf("%s: swanctl --initiate: %v\n%s", what, err, out)
		}
		s := d.waitIKE("alice's child", anyChild)
		if got := fmt.Sprint(s.RemoteEAPID, " ", s.RemoteAuth, " ", s.RemoteVIPs, s.Children[0].RemoteTS); got != "alice eap-md5 [10.3.0.1 fd00:3::1] [10.3.0.1/32 fd00:3::1/128]" {
			t.Fatalf("%s: ike list: EAP identity, auth, virtual IPs, remote_ts: %s; want alice by eap-md5 with 10.3.0.1 and fd00:3::1 alone", what, got)
		}
		log := rw.ch.LogSince(from)
		for _, want := range []string{"EAP method EAP_MD5 succeeded, no MSK established",
			"installing new virtual IP 10.3.0.1", "installing new virtual IP fd00:3::1",
			// charon asks for addresses only (CPRQ(ADDR ADDR6)): it
			// logs the DNS attributes it received as it processes them.
			"processing INTERNAL_IP4_DNS attribute", "processing INTERNAL_IP6_DNS attribute"} {
			if !strings.Contains(log, want) {
				t.Errorf("%s: charon's log lacks %q", what, want)
			}
		}
		for _, a := range []string{"10.3.0.1/32", "fd00:3::1/128"} {
			if out, _ := p.b.run("ip", "addr", "show", "dev", "ipsec0"); !strings.Contains(out, a) {
				t.Fatalf("%s: charon's ipsec0 has no %s:\n%s", what, a, out)
			}
		}
		ping(t, p.b, "198.51.100.1", 2)
		ping(t, p.b, "2001:db8:cafe::1", 2)
		if what == "first connect" {
			tcpTransfer(t, p.b, p.a, "198.51.100.1", 1<<20)
			tcpTransfer(t, p.b, p.a, "2001:db8:cafe::1", 1<<20)
			out, err := d.ctl("pool", "list", "--leases")
			if err != nil || !strings.Contains(out, "fd00:3::1") || !strings.Contains(out, "10.3.0.1") {
				t.Errorf("pool list --leases: %v\n%s", err, out)
			}
			waitMetrics(t, p.a, `ipsecd_ike_eap_total{method="EAP-MD5",result="succeeded"} 1`)
		}
		rw.down(t, d, "alice")
	}
}

// TestIKEEAPMD5DualStackClient: the real binary is an EAP-MD5 road
// warrior of a charon 5.9.8 gateway (a.test by its certificate, pools of
// each family with a DNS server each) and asks for both families (vips:
// [0.0.0.0, "::"]): it gets 10.3.0.7 and fd00:3::7, writes both DNS
// servers into resolve_file, and pings and sends a checksummed TCP
// stream from each virtual IP to the gateway's side (203.0.113.1 and
// 2001:db8:b::1); charon lists alice by EAP with both addresses.
func TestIKEEAPMD5DualStackClient(t *testing.T) {
	charontest.Require(t)
	p := newPair(t)
	p.b.mustRun(t, "ip", "addr", "add", innerB6+"/128", "dev", "lo")
	caFile, ch := startCharonEAPGateway(t, p, charontest.Conn{Remote: charontest.Peer{Auth: "eap-md5", EAPID: "alice"},
		LocalTS: "203.0.113.0/24, 2001:db8:b::/64", Pools: "rw, rw6", EAPSecret: "alice-md5-pw",
		PoolsConf: "pools {\n  rw {\n    addrs = 10.3.0.7/32\n    dns = 10.3.0.53\n  }\n  rw6 {\n    addrs = fd00:3::7/128\n    dns = fd00:3::53\n  }\n}\n"})

	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	cfg := eapRoadWarrior(caFile, "alice-md5-pw", resolv)
	for _, r := range [][2]string{
		{"routes: [203.0.113.0/24]", `routes: [203.0.113.0/24, "2001:db8:b::/64"]`},
		{"vips: [0.0.0.0]", `vips: [0.0.0.0, "::"]`},
		{"auth: eap-mschapv2,", "auth: eap-md5,"},
		{"remote_ts: [203.0.113.0/24]", `remote_ts: [203.0.113.0/24, "2001:db8:b::/64"]`},
	} {
		if !strings.Contains(cfg, r[0]) {
			t.Fatalf("eapRoadWarrior lacks %s", r[0])
		}
		cfg = strings.Replace(cfg, r[0], r[1], 1)
	}
	d := startDaemon(t, p.a, cfg)
	s := d.waitIKE("the child of 10.3.0.7 and fd00:3::7", anyChild)
	if got := fmt.Sprint(s.LocalVIPs, s.DNS, s.Children[0].LocalTS); got != "[10.3.0.7 fd00:3::7] [10.3.0.53 fd00:3::53] [10.3.0.7/32 fd00:3::7/128]" {
		t.Fatalf("ike list: local virtual IPs, DNS, local_ts: %s; want 10.3.0.7 and fd00:3::7 with a DNS server of each family", got)
	}
	if got, _ := os.ReadFile(resolv); !strings.Contains(string(got), "nameserver 10.3.0.53 # by ipsecd\n") || !strings.Contains(string(got), "nameserver fd00:3::53 # by ipsecd\n") {
		t.Errorf("resolve_file lacks a DNS server:\n%s", got)
	}
	before := childPackets(t, d)
	ping(t, p.a, innerB4, 2)
	ping(t, p.a, innerB6, 2)
	tcpTransfer(t, p.a, p.b, innerB4, 1<<20)
	tcpTransfer(t, p.a, p.b, innerB6, 1<<20)
	// 2 MiB in segments of at most 1,500 bytes, and the pings: the
	// child carried them, not the underlay.
	if got := childPackets(t, d) - before; got < 2<<20/1500+4 {
		t.Errorf("the child carried %d packets of the pings and streams, want %d or more", got, 2<<20/1500+4)
	}
	if list, _ := ch.Swanctl("--list-sas", "--raw"); !strings.Contains(list, "remote-eap-id=alice") || !strings.Contains(list, "remote-vips=[10.3.0.7 fd00:3::7]") {
		t.Errorf("charon does not list EAP identity alice with both addresses:\n%s", list)
	}
	if log := ch.LogSince(0); !strings.Contains(log, "EAP method EAP_MD5 succeeded, no MSK established") {
		t.Errorf("charon's log does not say EAP-MD5 succeeded")
	}
}
