//go:build linux

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/internal/charontest"
)

// raGateway is ipsecd's config as a remote-access gateway: certificate,
// a pool, EAP-MSCHAPv2 users, and the network behind it (198.51.100.0/24,
// on its interface, with the pool's DNS server) routed from the pool's
// clients.
func raGateway(cert, key string) string {
	return fmt.Sprintf(`log: {level: debug}
metrics: %s
underlay: {udp: "0.0.0.0:4500"}
interfaces:
  - {name: ipsec1, if_id: 1, addresses: [198.51.100.1/24], routes: [10.3.0.0/24]}
pools:
  - {name: rw, addrs: 10.3.0.0/24, dns: [198.51.100.53], dns_domains: [corp.example]}
connections:
  - name: rw
    proposals: [aes256-sha256-x25519]
    pools: [rw]
    local:  {auth: pubkey, id: a.test, cert: %s, key: %s}
    remote: {auth: eap-mschapv2}
    children:
      - {name: net, if_id: 1, local_ts: [198.51.100.0/24], remote_ts: [dynamic], esp_proposals: [aes128gcm16]}
secrets:
  - {type: eap, ids: [alice], secret: alice-mschapv2-pw}
  - {type: eap, ids: [dave], secret: dave-mschapv2-pw}
`, ikeMetricsAddr, cert, key)
}

// roadWarrior is one charon road warrior of the gateway in A: its
// namespace and charon, with a connection "test" of EAP-MSCHAPv2 as
// user, asking for an IPv4 virtual IP, to reach 198.51.100.0/24.
type roadWarrior struct {
	ns   *netns
	ch   *charontest.Charon
	conn charontest.Conn
	dir  string // its swanctl directory
}

// newRoadWarrior starts charon in ns, whose address is addr (routed
// through the gateway at underlayA4), and loads its connection.
func newRoadWarrior(t *testing.T, ns *netns, addr, user, password, caFile string) *roadWarrior {
	t.Helper()
	// kernel-libipsec routes remote_ts into its TUN and needs a route
	// towards the gateway to do it.
	ns.mustRun(t, "ip", "route", "add", "default", "via", underlayA4)
	ch := charontest.Start(t, ns.name, "")
	conn := charontest.Conn{LocalAddrs: addr, RemoteAddrs: underlayA4, Proposals: "aes256-sha256-x25519", Encap: true,
		Local: charontest.Peer{Auth: "eap-mschapv2", ID: "roadwarrior.test", EAPID: user}, Remote: charontest.Peer{Auth: "pubkey", ID: "a.test", CACerts: caFile},
		VIPs: "0.0.0.0", RemoteTS: "198.51.100.0/24", ESP: "aes128gcm16", EAPSecret: password}
	dir := filepath.Join(t.TempDir(), "swanctl")
	if err := os.MkdirAll(filepath.Join(dir, "x509ca"), 0o700); err != nil {
		t.Fatal(err)
	}
	ch.LoadDir(conn.String(), dir)
	return &roadWarrior{ns: ns, ch: ch, conn: conn, dir: dir}
}

// password loads the connection again with another password.
func (rw *roadWarrior) password(pw string) {
	rw.conn.EAPSecret = pw
	rw.ch.LoadDir(rw.conn.String(), rw.dir)
}

// up initiates and waits until the gateway d lists the user's child
// with vip, which charon's ipsec0 must hold.
func (rw *roadWarrior) up(t *testing.T, d *daemon, what, user, vip string) {
	t.Helper()
	if out, err := rw.ch.Swanctl("--initiate", "--child", "net", "--timeout", "15"); err != nil {
		t.Fatalf("%s: swanctl --initiate: %v\n%s", what, err, out)
	}
	s := d.waitIKE(user+"'s child", func(s control.IKESAInfo, _ control.IKEChildInfo) bool { return s.RemoteEAPID == user })
	if fmt.Sprint(s.RemoteVIPs) != "["+vip+"]" || fmt.Sprint(s.Children[0].RemoteTS) != "["+vip+"/32]" {
		t.Fatalf("%s: ike list: %s has virtual IPs %v, remote_ts %v; want %s alone", what, user, s.RemoteVIPs, s.Children[0].RemoteTS, vip)
	}
	if out, _ := rw.ns.run("ip", "addr", "show", "dev", "ipsec0"); !strings.Contains(out, vip+"/32") {
		t.Fatalf("%s: charon's ipsec0 has no %s:\n%s", what, vip, out)
	}
}

// down terminates the connection and waits until the gateway d lists
// no IKE SA of user.
func (rw *roadWarrior) down(t *testing.T, d *daemon, user string) {
	t.Helper()
	if out, err := rw.ch.Swanctl("--terminate", "--ike", "test", "--timeout", "10"); err != nil {
		t.Fatalf("swanctl --terminate: %v\n%s", err, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for slices.ContainsFunc(d.ikeList(), func(s control.IKESAInfo) bool { return s.RemoteEAPID == user }) {
		if time.Now().After(deadline) {
			t.Fatalf("ipsecd still lists %s's IKE SA 10 s after charon deleted it", user)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestIKECharonRoadWarrior: the real binary as a remote-access gateway
// and charon 5.9.8 (kernel-libipsec) as the road warrior: EAP-MSCHAPv2
// against the gateway's certificate, a virtual IP from the pool with its
// DNS server, ping and a checksummed TCP stream from the virtual IP to the
// network behind the gateway; ike list and pool list show the client;
// a reconnect, and a reconnect after a restart of the gateway, get the
// same address back (the lease kept in state_dir).
func TestIKECharonRoadWarrior(t *testing.T) {
	charontest.Require(t)
	p := newPair(t)
	caFile, cert, key := raPKI(t, t.TempDir())
	rw := newRoadWarrior(t, p.b, underlayB4, "alice", "alice-mschapv2-pw", caFile)
	d := startDaemon(t, p.a, raGateway(cert, key))
	mon := d.monitor(t)

	rw.up(t, d, "first connect", "alice", "10.3.0.1")
	// The lease going online and (below) offline shows in ipsecd monitor.
	leaseEvent := func(typ string) {
		t.Helper()
		ev := mon.next(t, func(ev control.Event) bool { return ev.Type == typ })
		if ev.Detail[control.DetailEAPID] != "alice" || ev.Detail[control.DetailVIPs] != "10.3.0.1" {
			t.Errorf("%s: detail %v, want eap_id alice and vips 10.3.0.1", typ, ev.Detail)
		}
	}
	leaseEvent("ike_up")
	ping(t, p.b, "198.51.100.1", 3)
	tcpTransfer(t, p.b, p.a, "198.51.100.1", 1<<20)
	if log := rw.ch.LogSince(0); !strings.Contains(log, "INTERNAL_IP4_DNS") || !strings.Contains(log, "authentication of 'a.test' with ECDSA_WITH_SHA256_DER successful") {
		t.Errorf("charon's log lacks the DNS attribute or our certificate's authentication")
	}
	out, err := d.ctl("pool", "list", "--leases")
	if err != nil || !strings.Contains(out, "rw ") || !strings.Contains(out, "10.3.0.1") || !strings.Contains(out, "online  'alice'") {
		t.Errorf("pool list --leases: %v\n%s", err, out)
	}
	if out, _ := d.ctl("ike", "list"); !strings.Contains(out, "remote EAP identity 'alice', virtual IPs 10.3.0.1") {
		t.Errorf("ike list does not show alice's EAP identity and address:\n%s", out)
	}
	metrics := func(want ...string) {
		t.Helper()
		body := scrape(t, p.a, "http://"+ikeMetricsAddr+"/metrics")
		for _, w := range want {
			if !strings.Contains(body, "\n"+w+"\n") {
				t.Errorf("metrics lack %s", w)
			}
		}
	}
	metrics(`ipsecd_pool_addresses{pool="rw",state="online"} 1`, `ipsecd_pool_addresses{pool="rw",state="free"} 253`,
		`ipsecd_ike_eap_total{method="EAP-MSCHAPv2",result="succeeded"} 1`)

	rw.down(t, d, "alice")
	leaseEvent("ike_down")
	if out, _ := d.ctl("pool", "list", "--leases"); !strings.Contains(out, "offline 'alice'") {
		t.Errorf("after the disconnect, alice's lease is not offline:\n%s", out)
	}
	rw.up(t, d, "reconnect", "alice", "10.3.0.1")
	ping(t, p.b, "198.51.100.1", 2)
	rw.down(t, d, "alice")

	// A wrong password: refused, counted, logged with the user and the
	// method and without the password.
	rw.password("not-alices-password")
	if out, err := rw.ch.Swanctl("--initiate", "--child", "net", "--timeout", "15"); err == nil {
		t.Fatalf("swanctl --initiate with a wrong password succeeded:\n%s", out)
	}
	metrics(`ipsecd_ike_eap_total{method="EAP-MSCHAPv2",result="failed"} 1`, `ipsecd_ike_auth_failures_total 1`,
		`ipsecd_ike_eap_failures_total{reason="wrong_password"} 1`, `ipsecd_ike_eap_failures_total{reason="unknown_user"} 0`)
	if log := d.log.String(); !strings.Contains(log, `EAP-MSCHAPv2 of \"alice\" failed: wrong password`) || strings.Contains(log, "not-alices-password") {
		t.Errorf("ipsecd's log does not name alice and the method, or names the password")
	}
	rw.password("alice-mschapv2-pw")

	// A restarted gateway gives alice her address back: the lease is in
	// state_dir.
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	d.start()
	rw.up(t, d, "reconnect after the gateway's restart", "alice", "10.3.0.1")
	ping(t, p.b, "198.51.100.1", 2)
}

// TestIKECharonTwoRoadWarriors: two charon road warriors (B and C, on
// one bridge with the gateway A) are up at once with distinct leases,
// each pinging the network behind the gateway from its own address
// through the gateway's one interface; the one that connected second
// keeps its own address when it reconnects after the other left. Both
// send one IKE identity (roadwarrior.test) and INITIAL_CONTACT, as
// clients behind NATs with the same private address do: only their EAP
// identities tell them apart, and dave's login must not drop alice's SA
// (it did before samePeer compared EAP identities).
func TestIKECharonTwoRoadWarriors(t *testing.T) {
	charontest.Require(t)
	p := newPair(t)
	c := thirdOnBridge(t, p)
	caFile, cert, key := raPKI(t, t.TempDir())
	alice := newRoadWarrior(t, p.b, underlayB4, "alice", "alice-mschapv2-pw", caFile)
	dave := newRoadWarrior(t, c, "192.0.2.3", "dave", "dave-mschapv2-pw", caFile)
	d := startDaemon(t, p.a, raGateway(cert, key))

	alice.up(t, d, "alice", "alice", "10.3.0.1")
	dave.up(t, d, "dave", "dave", "10.3.0.2")
	ping(t, p.b, "198.51.100.1", 3)
	ping(t, c, "198.51.100.1", 3)
	if n := len(d.ikeList()); n != 2 {
		t.Errorf("ipsecd lists %d IKE SAs, want 2", n)
	}
	alice.down(t, d, "alice")
	ping(t, c, "198.51.100.1", 2)
	dave.down(t, d, "dave")
	dave.up(t, d, "dave again", "dave", "10.3.0.2")
	ping(t, c, "198.51.100.1", 2)
}

// thirdOnBridge makes a third namespace, C at 192.0.2.3, on B's link to
// A: A's veth0 and a second pair to C join a bridge, so that road
// warriors in B and C reach the gateway in A at underlayA4.
func thirdOnBridge(t *testing.T, p *pair) *netns {
	t.Helper()
	c := newNetns(t)
	p.a.mustRun(t, "ip", "link", "add", "br0", "type", "bridge")
	p.a.mustRun(t, "ip", "addr", "del", underlayA4+"/24", "dev", "veth0")
	p.a.mustRun(t, "ip", "link", "set", "veth0", "master", "br0")
	p.a.mustRun(t, "ip", "link", "add", "veth2", "type", "veth", "peer", "name", "veth3", "netns", c.name)
	p.a.mustRun(t, "ip", "link", "set", "veth2", "master", "br0")
	p.a.mustRun(t, "ip", "addr", "add", underlayA4+"/24", "dev", "br0")
	p.a.mustRun(t, "ip", "link", "set", "veth2", "up")
	p.a.mustRun(t, "ip", "link", "set", "br0", "up")
	c.mustRun(t, "ip", "addr", "add", "192.0.2.3/24", "dev", "veth3")
	c.mustRun(t, "ip", "link", "set", "veth3", "up")
	return c
}

// TestIKEVirtualIPClient: the real binary as a road warrior of a charon
// gateway (pre-shared keys both ways): it asks for an address (vips:
// [0.0.0.0]), takes 10.3.0.7 and the DNS server from charon's pool, puts
// the address on its interface (which has none of its own), pings the
// network behind the gateway from it and sends a checksummed TCP stream; ike list shows the address and the
// DNS server; the address leaves the interface with the IKE SA.
func TestIKEVirtualIPClient(t *testing.T) {
	charontest.Require(t)
	p := newPair(t)
	p.b.mustRun(t, "ip", "addr", "add", innerB4+"/32", "dev", "lo")
	p.b.mustRun(t, "ip", "route", "add", "default", "via", underlayA4)
	ch := charontest.Start(t, p.b.name, "")
	ch.Load(charontest.Conn{LocalAddrs: underlayB4, RemoteAddrs: underlayA4, Proposals: "aes256-sha256-x25519", Encap: true,
		Local: charontest.Peer{ID: "b.test"}, Remote: charontest.Peer{ID: "a.test"},
		LocalTS: "203.0.113.0/24", RemoteTS: "dynamic", ESP: "aes128gcm16", Pools: "rw",
		PoolsConf: "pools {\n  rw {\n    addrs = 10.3.0.7/32\n    dns = 10.3.0.53\n  }\n}\n"}.String())
	d := startDaemon(t, p.a, fmt.Sprintf(`log: {level: debug}
underlay: {udp: "0.0.0.0:4500"}
interfaces:
  - {name: ipsec1, if_id: 1, routes: [203.0.113.0/24]}
connections:
  - name: office
    local_addrs: [%s]
    remote_addrs: [%s]
    proposals: [aes256-sha256-x25519]
    vips: [0.0.0.0]
    local:  {auth: psk, id: a.test}
    remote: {auth: psk, id: b.test}
    children:
      - {name: net, if_id: 1, local_ts: [dynamic], remote_ts: [203.0.113.0/24], esp_proposals: [aes128gcm16], start_action: start}
secrets:
  - {ids: [a.test, b.test], secret: %q}
`, underlayA4, underlayB4, charontest.PSK))
	s := d.waitIKE("the child of 10.3.0.7", anyChild)
	if fmt.Sprint(s.LocalVIPs, s.DNS, s.Children[0].LocalTS) != "[10.3.0.7] [10.3.0.53] [10.3.0.7/32]" {
		t.Errorf("ike list: local virtual IPs %v, DNS %v, local_ts %v; want 10.3.0.7, 10.3.0.53, 10.3.0.7/32", s.LocalVIPs, s.DNS, s.Children[0].LocalTS)
	}
	ping(t, p.a, innerB4, 3)
	tcpTransfer(t, p.a, p.b, innerB4, 1<<20)
	if list, _ := ch.Swanctl("--list-sas", "--raw"); !strings.Contains(list, "remote-vips=[10.3.0.7]") {
		t.Errorf("charon does not list our virtual IP:\n%s", list)
	}
	if out, _ := d.ctl("ike", "list"); !strings.Contains(out, "local virtual IPs 10.3.0.7, DNS 10.3.0.53") {
		t.Errorf("ike list does not show the virtual IP and DNS:\n%s", out)
	}
	if out, _ := p.a.run("ip", "addr", "show", "dev", "ipsec1"); !strings.Contains(out, "10.3.0.7/32") {
		t.Errorf("ipsec1 does not hold the virtual IP:\n%s", out)
	}
	d.mustCtl(t, "ike", "terminate", "--ike", "office")
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, _ := p.a.run("ip", "addr", "show", "dev", "ipsec1")
		if !strings.Contains(out, "10.3.0.7") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ipsec1 still holds the virtual IP 10 s after the IKE SA was terminated:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
