//go:build linux

package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/internal/charontest"
)

// pskGateway is ipsecd's config as a gateway of road warriors that all
// prove one IKE identity, rw.test, with one pre-shared key, and get an
// address of pool rw and its DNS server.
func pskGateway() string {
	return fmt.Sprintf(`log: {level: debug}
metrics: %s
underlay: {udp: "0.0.0.0:4500"}
interfaces:
  - {name: ipsec1, if_id: 1, addresses: [198.51.100.1/24], routes: [10.3.0.0/24]}
pools:
  - {name: rw, addrs: 10.3.0.0/24, dns: [10.3.0.53]}
connections:
  - name: rw
    proposals: [aes256-sha256-x25519]
    pools: [rw]
    local:  {auth: psk, id: a.test}
    remote: {auth: psk, id: rw.test}
    children:
      - {name: net, if_id: 1, local_ts: [198.51.100.0/24], remote_ts: [dynamic], esp_proposals: [aes128gcm16]}
secrets:
  - {ids: [a.test, rw.test], secret: %q}
`, ikeMetricsAddr, charontest.PSK)
}

// pskWarrior is a charon road warrior in ns at addr, proving rw.test
// with the gateway's PSK, asking for a virtual IP.
type pskWarrior struct {
	ns   *netns
	ch   *charontest.Charon
	conn charontest.Conn
	addr string
}

func newPSKWarrior(t *testing.T, ns *netns, addr string) *pskWarrior {
	t.Helper()
	ns.mustRun(t, "ip", "route", "add", "default", "via", underlayA4)
	w := &pskWarrior{ns: ns, ch: charontest.Start(t, ns.name, ""), addr: addr,
		conn: charontest.Conn{LocalAddrs: addr, RemoteAddrs: underlayA4, Proposals: "aes256-sha256-x25519", Encap: true,
			Local: charontest.Peer{Auth: "psk", ID: "rw.test"}, Remote: charontest.Peer{Auth: "psk", ID: "a.test"},
			VIPs: "0.0.0.0", RemoteTS: "198.51.100.0/24", ESP: "aes128gcm16"}}
	w.ch.Load(w.conn.String())
	return w
}

// unique loads the connection again with swanctl's unique policy: never
// makes charon send no INITIAL_CONTACT.
func (w *pskWarrior) unique(policy string) {
	w.conn.Unique = policy
	w.ch.Load(w.conn.String())
}

// up initiates and waits until the gateway lists an IKE SA from w's
// address with vip ("": any one), which charon's ipsec0 must hold; it
// returns the address.
func (w *pskWarrior) up(t *testing.T, d *daemon, what, vip string) string {
	t.Helper()
	if out, err := w.ch.Swanctl("--initiate", "--child", "net", "--timeout", "15"); err != nil {
		t.Fatalf("%s: swanctl --initiate: %v\n%s", what, err, out)
	}
	s := d.waitIKE(what, func(s control.IKESAInfo, _ control.IKEChildInfo) bool { return s.Remote.Addr().String() == w.addr })
	if vip == "" && len(s.RemoteVIPs) == 1 {
		vip = s.RemoteVIPs[0]
	}
	if s.RemoteID != "rw.test" || fmt.Sprint(s.RemoteVIPs) != "["+vip+"]" {
		t.Fatalf("%s: ike list: %s from %v has virtual IPs %v; want rw.test with %s", what, s.RemoteID, s.Remote, s.RemoteVIPs, vip)
	}
	if out, _ := w.ns.run("ip", "addr", "show", "dev", "ipsec0"); !strings.Contains(out, vip+"/32") {
		t.Fatalf("%s: charon's ipsec0 has no %s:\n%s", what, vip, out)
	}
	return vip
}

// down terminates w's IKE SA and waits until the gateway has none.
func (w *pskWarrior) down(t *testing.T, d *daemon, what string) {
	t.Helper()
	if out, err := w.ch.Swanctl("--terminate", "--ike", "test", "--timeout", "10"); err != nil {
		t.Fatalf("%s: swanctl --terminate: %v\n%s", what, err, out)
	}
	w.gone(t, d, what)
}

// gone waits until the gateway lists no IKE SA from w's address.
func (w *pskWarrior) gone(t *testing.T, d *daemon, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for slices.ContainsFunc(d.ikeList(), func(s control.IKESAInfo) bool { return s.Remote.Addr().String() == w.addr }) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: ipsecd still lists the IKE SA from %s after 10 s", what, w.addr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestIKECharonPSKSharedID: two charon 5.9.8 road warriors prove the same
// IKE identity with the same pre-shared key, as a gateway's users sharing
// one group PSK do. Their leases are that identity's, as strongSwan's
// mem_pool keeps them: a second client online at once gets an address of
// its own, and a client that comes back gets the identity's offline
// lease again.
//
//   - charon's default (unique = no): the second client's INITIAL_CONTACT
//     says the identity restarted, and the gateway drops the first's IKE
//     SA, as strongSwan's gateway does; the second has 10.3.0.2 (the
//     first was online when it asked), and 10.3.0.1 goes offline.
//   - unique = never on both clients (charon then sends no
//     INITIAL_CONTACT): both stay online with 10.3.0.1 and 10.3.0.2 and
//     the pool's DNS server, and ping and send a checksummed TCP stream
//     through the gateway; the first hangs up and comes back with
//     10.3.0.1 again while the second keeps 10.3.0.2.
//   - unique: never on the gateway's connection (swanctl's), the clients
//     back to sending INITIAL_CONTACT: the gateway ignores it, both stay
//     up with the identity's two leases and ping (before unique: never
//     existed, the second's INITIAL_CONTACT dropped the first, as in the
//     first case).
func TestIKECharonPSKSharedID(t *testing.T) {
	charontest.Require(t)
	p := newPair(t)
	c := thirdOnBridge(t, p)
	first := newPSKWarrior(t, p.b, underlayB4)
	second := newPSKWarrior(t, c, "192.0.2.3")
	d := startDaemon(t, p.a, pskGateway())
	// leases checks pool list --leases for want, address then state
	// (online, offline) of rw.test's leases.
	leases := func(what string, want ...string) {
		t.Helper()
		out, err := d.ctl("pool", "list", "--leases")
		if err != nil {
			t.Fatalf("%s: pool list: %v\n%s", what, err, out)
		}
		for i := 0; i+1 < len(want); i += 2 {
			if !slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool {
				return slices.Equal(strings.Fields(l), []string{want[i], want[i+1], "'rw.test'"})
			}) {
				t.Errorf("%s: pool list --leases lacks %s %s of rw.test:\n%s", what, want[i], want[i+1], out)
			}
		}
	}

	// INITIAL_CONTACT from the second replaces the first.
	first.up(t, d, "first", "10.3.0.1")
	second.up(t, d, "second, with INITIAL_CONTACT", "10.3.0.2")
	first.gone(t, d, "the first, after the second's INITIAL_CONTACT")
	if !strings.Contains(d.log.String(), "the peer restarted (INITIAL_CONTACT): dropping its old IKE SA") {
		t.Errorf("the gateway did not log why it dropped the first's IKE SA")
	}
	leases("after INITIAL_CONTACT", "10.3.0.1", "offline", "10.3.0.2", "online")
	// The first's charon still holds its SA; it forgets it here.
	first.ch.Swanctl("--terminate", "--ike", "test", "--timeout", "5")
	second.down(t, d, "the second, terminated")

	// Without INITIAL_CONTACT both stay online, each with its address.
	first.unique("never")
	second.unique("never")
	first.up(t, d, "first, unique never", "10.3.0.1")
	second.up(t, d, "second, unique never", "10.3.0.2")
	if n := len(d.ikeList()); n != 2 {
		t.Fatalf("ipsecd lists %d IKE SAs; want both clients'", n)
	}
	ping(t, p.b, "198.51.100.1", 2)
	ping(t, c, "198.51.100.1", 2)
	// A checksummed stream from each client's address, at once up.
	tcpTransfer(t, p.b, p.a, "198.51.100.1", 1<<20)
	tcpTransfer(t, c, p.a, "198.51.100.1", 1<<20)
	for _, w := range []*pskWarrior{first, second} {
		if !strings.Contains(w.ch.LogSince(0), "processing INTERNAL_IP4_DNS attribute") {
			t.Errorf("charon at %s received no DNS server", w.addr)
		}
	}
	leases("both online", "10.3.0.1", "online", "10.3.0.2", "online")

	// The first comes back: the identity's offline lease, its own again.
	first.down(t, d, "the first, terminated")
	leases("the first away", "10.3.0.1", "offline", "10.3.0.2", "online")
	first.up(t, d, "first, back", "10.3.0.1")
	ping(t, p.b, "198.51.100.1", 2)
	ping(t, c, "198.51.100.1", 2)
	if n := len(d.ikeList()); n != 2 {
		t.Errorf("ipsecd lists %d IKE SAs after the first came back; want 2", n)
	}
	first.down(t, d, "the first, terminated again")
	second.down(t, d, "the second, terminated again")

	// unique: never on the gateway: clients that send INITIAL_CONTACT
	// (charon's default, and phones') all stay up, each with one of the
	// identity's leases.
	d.reload(t, strings.Replace(pskGateway(), "    pools: [rw]\n", "    pools: [rw]\n    unique: never\n", 1))
	d.waitLog(t, "reload: ike connections")
	first.unique("no")
	second.unique("no")
	a := first.up(t, d, "first, gateway unique never", "")
	b := second.up(t, d, "second with INITIAL_CONTACT, gateway unique never", "")
	if a == b || !slices.Contains([]string{"10.3.0.1", "10.3.0.2"}, a) || !slices.Contains([]string{"10.3.0.1", "10.3.0.2"}, b) {
		t.Errorf("the clients got %s and %s; want the identity's two leases, one each", a, b)
	}
	if n := len(d.ikeList()); n != 2 {
		t.Fatalf("ipsecd lists %d IKE SAs; want both clients' (INITIAL_CONTACT ignored)", n)
	}
	d.waitLog(t, "ignored (unique: never)")
	ping(t, p.b, "198.51.100.1", 2)
	ping(t, c, "198.51.100.1", 2)
}
