//go:build linux

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/internal/charontest"
)

// eapRoadWarrior is ipsecd's config as a road warrior of EAP-MSCHAPv2
// (eap_id alice, password pw) against the gateway a.test at underlayB4,
// asking for a virtual IP to reach 203.0.113.0/24, writing the DNS
// servers it gets to resolv.
func eapRoadWarrior(caFile, pw, resolv string) string {
	return fmt.Sprintf(`log: {level: debug}
metrics: %s
underlay: {udp: "0.0.0.0:4500"}
ike: {resolve_file: %s}
interfaces:
  - {name: ipsec1, if_id: 1, routes: [203.0.113.0/24]}
connections:
  - name: office
    local_addrs: [%s]
    remote_addrs: [%s]
    proposals: [aes256-sha256-x25519]
    vips: [0.0.0.0]
    local:  {auth: eap-mschapv2, id: roadwarrior.test, eap_id: alice}
    remote: {auth: pubkey, id: a.test, cacerts: [%s]}
    children:
      - {name: net, if_id: 1, local_ts: [dynamic], remote_ts: [203.0.113.0/24], esp_proposals: [aes128gcm16], start_action: start}
secrets:
  - {type: eap, ids: [alice], secret: %q}
`, ikeMetricsAddr, resolv, underlayA4, underlayB4, caFile, pw)
}

// charonGatewayDir makes the test PKI of a charon gateway (a.test) and
// its swanctl directory with the gateway's key in private/: the CA file
// for ipsecd, the certificate for swanctl.conf's certs, the directory.
func charonGatewayDir(t *testing.T) (caFile, cert, dir string) {
	t.Helper()
	caFile, cert, key := raPKI(t, t.TempDir())
	dir = filepath.Join(t.TempDir(), "swanctl")
	if err := os.MkdirAll(filepath.Join(dir, "private"), 0o700); err != nil {
		t.Fatal(err)
	}
	k, err := os.ReadFile(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "private", "gw.key"), k, 0o600); err != nil {
		t.Fatal(err)
	}
	return caFile, cert, dir
}

// startCharonEAPGateway starts charon in p.b as the EAP gateway a.test
// (by its certificate, at underlayB4) of a road warrior at underlayA4,
// with conn's remote peer, local_ts, pools and secret; innerB4 is on
// p.b's lo, behind it. It returns the CA file of the gateway's
// certificate and charon.
func startCharonEAPGateway(t *testing.T, p *pair, conn charontest.Conn) (string, *charontest.Charon) {
	t.Helper()
	p.b.mustRun(t, "ip", "addr", "add", innerB4+"/32", "dev", "lo")
	p.b.mustRun(t, "ip", "route", "add", "default", "via", underlayA4)
	caFile, cert, dir := charonGatewayDir(t)
	ch := charontest.Start(t, p.b.name, "")
	conn.LocalAddrs, conn.RemoteAddrs, conn.Proposals, conn.Encap = underlayB4, underlayA4, "aes256-sha256-x25519", true
	conn.Local = charontest.Peer{Auth: "pubkey", ID: "a.test", Certs: cert}
	conn.RemoteTS, conn.ESP = "dynamic", "aes128gcm16"
	ch.LoadDir(conn.String(), dir)
	return caFile, ch
}

// TestIKEEAPClient: the real binary is the road warrior of a charon 5.9.8
// gateway (a.test by its certificate, EAP-MSCHAPv2 for alice, a pool):
// it checks charon's certificate, runs EAP-MSCHAPv2 as alice, gets
// 10.3.0.7, pings behind the gateway from it and sends a checksummed
// TCP stream; charon lists alice as
// the EAP identity. The DNS server and domain go before the lines of
// resolve_file, ike list shows them, and they leave with the IKE SA. With a wrong password the IKE SA fails, counted, the
// log naming alice and not the password.
func TestIKEEAPClient(t *testing.T) {
	charontest.Require(t)
	p := newPair(t)
	caFile, ch := startCharonEAPGateway(t, p, charontest.Conn{Remote: charontest.Peer{Auth: "eap-mschapv2", EAPID: "alice"},
		LocalTS: "203.0.113.0/24", Pools: "rw", EAPSecret: "alice-mschapv2-pw",
		PoolsConf: "pools {\n  rw {\n    addrs = 10.3.0.7/32\n    dns = 10.3.0.53\n    25 = corp.example\n  }\n}\n"})

	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	const theirs = "# the host's\nnameserver 192.0.2.53\n"
	if err := os.WriteFile(resolv, []byte(theirs), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, p.a, eapRoadWarrior(caFile, "alice-mschapv2-pw", resolv))
	s := d.waitIKE("the child of 10.3.0.7", anyChild)
	if fmt.Sprint(s.LocalVIPs, s.Children[0].LocalTS) != "[10.3.0.7] [10.3.0.7/32]" {
		t.Errorf("ike list: local virtual IPs %v, local_ts %v; want 10.3.0.7", s.LocalVIPs, s.Children[0].LocalTS)
	}
	ping(t, p.a, innerB4, 3)
	tcpTransfer(t, p.a, p.b, innerB4, 1<<20)
	const ours = "nameserver 10.3.0.53 # by ipsecd\nsearch corp.example # by ipsecd\n"
	if got, _ := os.ReadFile(resolv); string(got) != ours+theirs {
		t.Errorf("resolve_file holds\n%s\nwant\n%s", got, ours+theirs)
	}
	if out, _ := d.ctl("ike", "list"); !strings.Contains(out, "DNS 10.3.0.53") || !strings.Contains(out, "DNS domains corp.example") {
		t.Errorf("ike list does not show the DNS server and domain:\n%s", out)
	}
	if list, _ := ch.Swanctl("--list-sas", "--raw"); !strings.Contains(list, "remote-eap-id=alice") || !strings.Contains(list, "remote-vips=[10.3.0.7]") {
		t.Errorf("charon does not list EAP identity alice with 10.3.0.7:\n%s", list)
	}
	if log := ch.LogSince(0); !strings.Contains(log, "EAP method EAP_MSCHAPV2 succeeded, MSK established") {
		t.Errorf("charon's log does not say EAP-MSCHAPv2 succeeded with an MSK")
	}
	if strings.Contains(d.log.String(), "alice-mschapv2-pw") {
		t.Error("ipsecd's log shows the password")
	}
	d.mustCtl(t, "ike", "terminate", "--ike", "office")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		got, _ := os.ReadFile(resolv)
		if string(got) == theirs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("resolve_file holds, 10 s after the IKE SA was terminated:\n%s", got)
		}
	}
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}

	// A wrong password: the IKE SA fails, counted, logged with the user
	// and the method and without the password.
	d = startDaemon(t, p.a, eapRoadWarrior(caFile, "not-alices-password", resolv))
	body := ""
	for range 100 {
		body = scrape(t, p.a, "http://"+ikeMetricsAddr+"/metrics")
		if strings.Contains(body, "\nipsecd_ike_auth_failures_total 1\n") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, w := range []string{`ipsecd_ike_auth_failures_total 1`, `ipsecd_ike_eap_total{method="EAP-MSCHAPv2",result="failed"} 1`} {
		if !strings.Contains(body, "\n"+w+"\n") {
			t.Errorf("metrics lack %s", w)
		}
	}
	if log := d.log.String(); !strings.Contains(log, `EAP-MSCHAPv2 of \"alice\" failed`) || strings.Contains(log, "not-alices-password") {
		t.Errorf("ipsecd's log does not name alice and the method, or names the password:\n%s", log)
	}
}

// TestIKEEAPClientsLeases: two real binaries, in B and C, are EAP-MSCHAPv2
// road warriors (alice and bob) of one charon 5.9.8 gateway in A (a.test
// by its certificate, the pool 10.3.0.0/24 with a DNS server): up at
// once, each has an address of its own with the DNS server and pings
// 203.0.113.1 behind the gateway from it, alice also sending a
// checksummed TCP stream; bob reconnects after alice left and gets his
// own address again, not the next free one, and pings from it. (The ping
// failed before RemoveDynamicAddress put the interface's routes back:
// removing bob's virtual IP, his interface's only IPv4 address, made
// Linux flush its configured route to 203.0.113.0/24, and "No route to
// host" after the reconnect.)
func TestIKEEAPClientsLeases(t *testing.T) {
	charontest.Require(t)
	p := newPair(t)
	c := thirdOnBridge(t, p)
	p.a.mustRun(t, "ip", "addr", "add", innerB4+"/32", "dev", "lo")
	// kernel-libipsec routes each client's virtual IP into its TUN and
	// needs a route towards the clients to do it.
	p.a.mustRun(t, "ip", "route", "add", "default", "via", underlayB4)
	caFile, cert, dir := charonGatewayDir(t)
	ch := charontest.Start(t, p.a.name, "")
	ch.LoadDir(charontest.Conn{LocalAddrs: underlayA4, Proposals: "aes256-sha256-x25519", Encap: true,
		Local: charontest.Peer{Auth: "pubkey", ID: "a.test", Certs: cert}, Remote: charontest.Peer{Auth: "eap-mschapv2", EAPID: "%any"},
		LocalTS: "203.0.113.0/24", RemoteTS: "dynamic", ESP: "aes128gcm16", Pools: "rw",
		PoolsConf: "pools {\n  rw {\n    addrs = 10.3.0.0/24\n    dns = 10.3.0.53\n  }\n}\n"}.String()+
		"secrets {\n  eap-alice {\n    id = alice\n    secret = alice-mschapv2-pw\n  }\n  eap-bob {\n    id = bob\n    secret = bob-mschapv2-pw\n  }\n}\n", dir)

	// client is eapRoadWarrior at addr as user, towards the gateway in A.
	client := func(ns *netns, addr, user string) *daemon {
		cfg := eapRoadWarrior(caFile, user+"-mschapv2-pw", t.TempDir()+"/resolv.conf")
		for _, r := range [][2]string{
			{"local_addrs: [" + underlayA4 + "]", "local_addrs: [" + addr + "]"},
			{"remote_addrs: [" + underlayB4 + "]", "remote_addrs: [" + underlayA4 + "]"},
			{"id: roadwarrior.test, eap_id: alice}", "id: " + user + ".test, eap_id: " + user + "}"},
			{"ids: [alice]", "ids: [" + user + "]"},
		} {
			if !strings.Contains(cfg, r[0]) {
				t.Fatalf("eapRoadWarrior lacks %s", r[0])
			}
			cfg = strings.Replace(cfg, r[0], r[1], 1)
		}
		return startDaemon(t, ns, cfg)
	}
	// up waits for d's child and checks its virtual IP and DNS server.
	up := func(d *daemon, what, vip string) {
		t.Helper()
		s := d.waitIKE(what, anyChild)
		if fmt.Sprint(s.LocalVIPs, s.DNS) != "["+vip+"] [10.3.0.53]" {
			t.Fatalf("%s: ike list: virtual IPs %v, DNS %v; want %s and 10.3.0.53", what, s.LocalVIPs, s.DNS, vip)
		}
	}
	alice := client(p.b, underlayB4, "alice")
	up(alice, "alice", "10.3.0.1")
	bob := client(c, "192.0.2.3", "bob")
	up(bob, "bob", "10.3.0.2")
	ping(t, p.b, innerB4, 2)
	ping(t, c, innerB4, 2)
	tcpTransfer(t, p.b, p.a, innerB4, 1<<20)
	if list, _ := ch.Swanctl("--list-sas", "--raw"); !strings.Contains(list, "remote-eap-id=alice") || !strings.Contains(list, "remote-eap-id=bob") {
		t.Errorf("charon does not list both EAP identities:\n%s", list)
	}

	// gone waits until d lists no IKE SA.
	gone := func(d *daemon, what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for len(d.ikeList()) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the IKE SA is still listed after 10 s", what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	alice.mustCtl(t, "ike", "terminate", "--ike", "office")
	gone(alice, "alice, terminated")
	bob.mustCtl(t, "ike", "terminate", "--ike", "office")
	gone(bob, "bob, terminated")
	bob.mustCtl(t, "ike", "initiate", "--ike", "office")
	up(bob, "bob, back", "10.3.0.2")
	ping(t, c, innerB4, 2)
}
