//go:build linux

package integration

import (
	"fmt"
	"net/netip"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/internal/radiustest"
)

// TestRATwoGateways' addresses. The clients' namespace has a link to
// each gateway (a phone on one network, then on another); each gateway
// a link to the office LAN, whose namespace holds FreeRADIUS and the
// server on its loopback. The clients' virtual IPs come from one plan,
// FreeRADIUS's SQL pool, whichever gateway they log in at.
const (
	twoGWPlan     = "10.9.0.0/24"
	twoGWOffice   = "203.0.113.0/24"
	twoGWRADIUS   = "203.0.113.10"
	twoGWServer   = "203.0.113.100"
	twoGWSecret   = "the gateways' RADIUS secret"
	twoGWClients  = 100 // besides the one that moves
	twoGWMoverID  = "mover"
	twoGWEchoPort = 7
	twoGWSinkPort = 9
)

// twoGWSite is one gateway's side: its address toward the clients, the
// client's on that link, its LAN address and the LAN's on that link.
type twoGWSite struct {
	ns                          *netns
	nas                         string // nas_identifier
	outside, client, lan, inner string
	ownPool                     string // the pool's addrs, used if RADIUS assigned none
}

var twoGWSites = [2]twoGWSite{
	{nas: "gw1", outside: "192.0.2.1", client: "192.0.2.2", lan: "198.51.100.1", inner: "198.51.100.2", ownPool: "10.8.1.0/28"},
	{nas: "gw2", outside: "192.0.2.129", client: "192.0.2.130", lan: "198.51.100.129", inner: "198.51.100.130", ownPool: "10.8.2.0/28"},
}

// twoGWNet is the four namespaces and their links.
type twoGWNet struct {
	clients, office *netns
	sites           [2]twoGWSite
}

// joinVeth joins a and b by a veth pair in /25s of their addresses.
func joinVeth(t *testing.T, a *netns, aDev, aAddr string, b *netns, bDev, bAddr string) {
	t.Helper()
	a.mustRun(t, "ip", "link", "add", aDev, "type", "veth", "peer", "name", bDev, "netns", b.name)
	for _, e := range []struct {
		ns        *netns
		dev, addr string
	}{{a, aDev, aAddr}, {b, bDev, bAddr}} {
		e.ns.mustRun(t, "ip", "addr", "add", e.addr+"/25", "dev", e.dev)
		e.ns.mustRun(t, "ip", "link", "set", e.dev, "up")
	}
}

func newTwoGWNet(t *testing.T) *twoGWNet {
	t.Helper()
	n := &twoGWNet{clients: newNetns(t), office: newNetns(t), sites: twoGWSites}
	for _, a := range []string{twoGWRADIUS, twoGWServer} {
		n.office.mustRun(t, "ip", "addr", "add", a+"/32", "dev", "lo")
	}
	for i := range n.sites {
		s := &n.sites[i]
		s.ns = newNetns(t)
		joinVeth(t, s.ns, "out0", s.outside, n.clients, fmt.Sprintf("gw%d", i+1), s.client)
		joinVeth(t, s.ns, "lan0", s.lan, n.office, fmt.Sprintf("gw%d", i+1), s.inner)
		s.ns.mustRun(t, "ip", "route", "add", twoGWOffice, "via", s.inner)
		s.ns.mustRun(t, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	}
	return n
}

// twoGWGateway is one gateway's config: EAP through FreeRADIUS with
// accounting under its own NAS-Identifier and NAS-IP-Address, a request
// sent every 3 s, 5 times, until answered, the address RADIUS assigns
// (pools[].radius), and the plan routed into the clients' interface.
func twoGWGateway(s twoGWSite, cert, key, auth, acct string) string {
	_, acctPort, _ := strings.Cut(acct, ":")
	return fmt.Sprintf(`log: {level: info}
metrics: %s
underlay: {udp: "0.0.0.0:4500"}
interfaces:
  - {name: ipsec1, if_id: 1, routes: [%s]}
ike: {block_threshold: 0, init_limit_half_open: 0}
eap_radius:
  servers:
    - {name: freeradius, address: "%s", acct_port: %s, secret: %q}
  accounting: true
  nas_identifier: %s
  nas_ip: %s
  retransmit_timeout: 3s
  retransmit_base: 1
  retransmit_tries: 5
pools:
  - {name: rw, addrs: %s, radius: true}
`, ikeMetricsAddr, twoGWPlan, auth, acctPort, twoGWSecret, s.nas, s.outside, s.ownPool) + radiusGatewayConn(s.outside, cert, key, twoGWOffice, twoGWPlan)
}

// twoGWUser is client i's EAP identity and password; i == -1 is the one
// that moves.
func twoGWUser(i int) (id, pw string) {
	if i < 0 {
		return twoGWMoverID, "the mover's password"
	}
	return raEAPUser(i)
}

// twoGWClientsConfig is one ipsecd with every road warrior as a
// connection of its own: rw<i> logs in at gateway i%2 as EAP-MSCHAPv2
// user rw<i>; move1 and move2 are one user, "mover", at gw1 (started)
// and at gw2 (initiated when it moves). Each asks for a virtual IP, which
// goes on the one interface routed to the office.
func twoGWClientsConfig(sites [2]twoGWSite, caFile string) string {
	var b, secrets strings.Builder
	fmt.Fprintf(&b, `log: {level: info}
underlay: {udp: "0.0.0.0:4500"}
interfaces:
  - {name: ipsec1, if_id: 1, routes: [%s]}
connections:
`, twoGWOffice)
	conn := func(name, eapID string, s twoGWSite, action string) {
		fmt.Fprintf(&b, `  - name: %s
    local_addrs: [%s]
    remote_addrs: [%s]
    proposals: [aes256-sha256-x25519]
    vips: [0.0.0.0]
    local:  {auth: eap-mschapv2, id: %s.test, eap_id: %s}
    remote: {auth: pubkey, id: a.test, cacerts: [%s]}
    children:
      - {name: %s-net, if_id: 1, local_ts: [dynamic], remote_ts: [%s], esp_proposals: [aes128gcm16], start_action: %s}
`, name, s.client, s.outside, eapID, eapID, caFile, name, twoGWOffice, action)
	}
	for i := range twoGWClients {
		id, pw := twoGWUser(i)
		conn(id, id, sites[i%2], "start")
		fmt.Fprintf(&secrets, "  - {type: eap, ids: [%s], secret: %q}\n", id, pw)
	}
	id, pw := twoGWUser(-1)
	conn("move1", id, sites[0], "start")
	conn("move2", id, sites[1], "none")
	fmt.Fprintf(&secrets, "  - {type: eap, ids: [%s], secret: %q}\n", id, pw)
	return b.String() + "secrets:\n" + secrets.String()
}

// announce routes each virtual IP the gateway lists to it, in the
// office: what a routing daemon does for a gateway of remote access
// (docs/remote-access.md), a host route per client, replaced when the
// client moves. It returns the virtual IPs by EAP identity.
func announce(t *testing.T, office *netns, gw *daemon, via string) map[string]netip.Addr {
	t.Helper()
	vips := map[string]netip.Addr{}
	var batch strings.Builder
	for _, s := range gw.ikeList() {
		if s.State != "ESTABLISHED" || len(s.RemoteVIPs) != 1 {
			continue
		}
		vips[s.RemoteEAPID] = netip.MustParseAddr(s.RemoteVIPs[0])
		fmt.Fprintf(&batch, "route replace %s/32 via %s\n", s.RemoteVIPs[0], via)
	}
	cmd := exec.Command("ip", "-n", office.name, "-batch", "-")
	cmd.Stdin = strings.NewReader(batch.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ip -n %s -batch: %v\n%s", office.name, err, out)
	}
	return vips
}

// dropAccounting drops (or, with drop false, lets through again) what
// the gateway in ns sends to FreeRADIUS's accounting port: lost
// datagrams, which the gateway retransmits.
func dropAccounting(t *testing.T, ns *netns, drop bool) {
	t.Helper()
	rules := "delete table inet twogw\n"
	if drop {
		rules = fmt.Sprintf(`table inet twogw {
	chain out {
		type filter hook output priority 0;
		ip daddr %s udp dport 1813 drop
	}
}
`, twoGWRADIUS)
	}
	cmd := ns.cmd(t.Context(), "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft in %s: %v\n%s", ns.name, err, out)
	}
}

// findRecord returns the first of recs that match accepts, or nil.
func findRecord(recs []map[string]string, match func(map[string]string) bool) map[string]string {
	for _, r := range recs {
		if match(r) {
			return r
		}
	}
	return nil
}

// waitRecord waits up to bound for a record of FreeRADIUS's detail file
// that match accepts, and returns it.
func waitRecord(t *testing.T, fr *radiustest.Server, bound time.Duration, match func(map[string]string) bool) map[string]string {
	t.Helper()
	for deadline := time.Now().Add(bound); ; time.Sleep(50 * time.Millisecond) {
		if r := findRecord(fr.Detail(t), match); r != nil {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("no such accounting record after %v: %v", bound, fr.Detail(t))
		}
	}
}

// waitUp waits until d lists want established IKE SAs with a child, up
// to bound.
func waitUp(t *testing.T, d *daemon, want int, bound time.Duration) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for got := d.upCount(); got != want; got = d.upCount() {
		if time.Now().After(deadline) {
			t.Fatalf("in %s: %d IKE SAs up after %v; want %d", d.ns.name, got, bound, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestRATwoGateways (issue 25's "two gateways, one plan"): two `ipsecd
// run` gateways, each relaying EAP to one FreeRADIUS 3.2.1 in the office
// with its own NAS-Identifier, whose sqlippool leases Framed-IP-Address
// from one SQLite pool keyed by User-Name. One ipsecd brings up 100 road
// warriors with EAP-MSCHAPv2, 50 at each gateway: 100 distinct addresses
// of the plan, each the address FreeRADIUS leased to that user, and each
// client makes one TCP exchange with the office's server, which sees its
// virtual IP. One more client streams TCP to the server through gw1, is
// torn down there and brought up at gw2 (as a phone changing networks):
// it gets its address again and the same stream carries on, checksummed
// end to end. Then the clients stop, and the detail file holds, per
// session, one Start and one Stop with octets both ways, under the NAS
// it ran on: 102 sessions, the mover's two one per NAS.
func TestRATwoGateways(t *testing.T) {
	begin := time.Now()
	n := newTwoGWNet(t)
	users := []radiustest.User{}
	for i := -1; i < twoGWClients; i++ {
		id, pw := twoGWUser(i)
		users = append(users, radiustest.User{Name: id, Password: pw})
	}
	fr := radiustest.Start(t, radiustest.Options{NetNS: n.office.name, Secret: twoGWSecret, Users: users,
		Listen: netip.MustParseAddr(twoGWRADIUS), Clients: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")},
		IPPool: &radiustest.IPPool{Name: "ra", Prefix: netip.MustParsePrefix(twoGWPlan), Key: "%{User-Name}"}})
	caFile, cert, key := raPKI(t, t.TempDir())
	var gws [2]*daemon
	for i, s := range n.sites {
		gws[i] = startDaemon(t, s.ns, twoGWGateway(s, cert, key, fr.Auth, fr.Acct))
	}
	srv := startOfficeServer(t, n.office)

	// 100 road warriors and the mover, at once.
	up := time.Now()
	t.Logf("namespaces, FreeRADIUS and the gateways up in %.2f s", up.Sub(begin).Seconds())
	clients := startDaemon(t, n.clients, twoGWClientsConfig(n.sites, caFile))
	waitUp(t, clients, twoGWClients+1, 60*time.Second)
	waitUp(t, gws[0], twoGWClients/2+1, 10*time.Second)
	waitUp(t, gws[1], twoGWClients/2, 10*time.Second)
	tookUp := time.Since(up)
	vips := map[string]netip.Addr{}
	for i, gw := range gws {
		for id, a := range announce(t, n.office, gw, n.sites[i].lan) {
			vips[id] = a
		}
	}
	plan, leases := netip.MustParsePrefix(twoGWPlan), fr.Leases(t)
	seen := map[netip.Addr]string{}
	for _, s := range clients.ikeList() {
		id := strings.TrimSuffix(s.LocalID, ".test")
		if len(s.LocalVIPs) != 1 || s.LocalVIPs[0] != vips[id].String() {
			t.Fatalf("%s (%s) has virtual IPs %v; its gateway lists %v", s.Name, id, s.LocalVIPs, vips[id])
		}
		a := vips[id]
		if other, dup := seen[a]; dup || !plan.Contains(a) || leases[a] != id {
			t.Fatalf("%s has %v, also %q's, in %v: %v, leased by FreeRADIUS to %q", id, a, other, plan, plan.Contains(a), leases[a])
		}
		seen[a] = id
	}
	if len(seen) != twoGWClients+1 || len(leases) != twoGWClients+1 {
		t.Fatalf("%d distinct virtual IPs, %d leases in the SQL pool; want %d", len(seen), len(leases), twoGWClients+1)
	}
	t.Logf("%d road warriors up at two gateways with %d distinct addresses of %s in %.2f s", twoGWClients+1, len(seen), twoGWPlan, tookUp.Seconds())

	// One TCP exchange from each virtual IP.
	exch := time.Now()
	var from []netip.Addr
	for id, a := range vips {
		if id != twoGWMoverID {
			from = append(from, a)
		}
	}
	if err := echoFrom(n.clients, from); err != nil {
		t.Fatal(err)
	}
	for _, a := range from {
		if !srv.sawEcho(a) {
			t.Fatalf("the server had no exchange from %v (%s)", a, seen[a])
		}
	}
	t.Logf("%d TCP exchanges, one from each virtual IP, in %.2f s", len(from), time.Since(exch).Seconds())

	// The mover streams to the server through gw1, moves to gw2. gw1's
	// Stop of its session there is lost until gw2's Start is in: the
	// late Stop must not release the address the mover holds at gw2.
	mover := vips[twoGWMoverID]
	stream := startStreamFrom(t, n.clients, mover, srv)
	srv.waitSink(t, 64<<10, 10*time.Second)
	dropAccounting(t, n.sites[0].ns, true)
	clients.mustCtl(t, "ike", "terminate", "--ike", "move1")
	moved := time.Now()
	clients.mustCtl(t, "ike", "initiate", "--ike", "move2")
	s := clients.waitIKE("move2's child", func(s control.IKESAInfo, _ control.IKEChildInfo) bool { return s.Name == "move2" })
	if fmt.Sprint(s.LocalVIPs) != fmt.Sprintf("[%v]", mover) {
		t.Fatalf("the mover got %v at gw2; want its %v again", s.LocalVIPs, mover)
	}
	if at2 := announce(t, n.office, gws[1], n.sites[1].lan)[twoGWMoverID]; at2 != mover {
		t.Fatalf("gw2 lists the mover at %v; want %v", at2, mover)
	}
	tookMove := time.Since(moved)
	moverRec := func(status, nas string) func(map[string]string) bool {
		return func(r map[string]string) bool {
			return r["User-Name"] == twoGWMoverID && r["Acct-Status-Type"] == status && r["NAS-Identifier"] == nas
		}
	}
	waitRecord(t, fr, 10*time.Second, moverRec("Start", "gw2"))
	if stop := findRecord(fr.Detail(t), moverRec("Stop", "gw1")); stop != nil {
		t.Fatalf("gw1's Stop of the mover arrived before its Start at gw2: %v", stop)
	}
	// FreeRADIUS answers the Stop once its accounting section, detail
	// and sqlippool, is done: the lease is read after gw1 got the answer.
	answered := radiusCount(t, n.sites[0].ns, "accounting_response")
	dropAccounting(t, n.sites[0].ns, false)
	waitRecord(t, fr, 10*time.Second, moverRec("Stop", "gw1"))
	for deadline := time.Now().Add(10 * time.Second); radiusCount(t, n.sites[0].ns, "accounting_response") == answered; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("gw1 got no answer to its late Stop within 10 s")
		}
	}
	lateAfter := time.Since(moved)
	if l := fr.Leases(t); l[mover] != twoGWMoverID {
		t.Fatalf("after gw1's late Stop FreeRADIUS leases %v to %q; want the mover's, in use at gw2", mover, l[mover])
	}
	srv.waitSink(t, srv.sinkBytes()+256<<10, 20*time.Second)
	stream.finish(t, srv)
	t.Logf("the mover (%v) was back at gw2 with its address %.2f s after leaving gw1; gw1's Stop came after gw2's Start, %.2f s after the move, and the lease stayed; its stream carried %d bytes, checksums equal, from %v throughout",
		mover, tookMove.Seconds(), lateAfter.Seconds(), stream.sent, mover)

	// Every session ends: the clients' daemon deletes its IKE SAs.
	stopped := time.Now()
	if err := clients.stop(); err != nil {
		t.Fatal(err)
	}
	retransmitted := 0
	for _, site := range n.sites {
		retransmitted += radiusCount(t, site.ns, "retransmission")
	}
	checkTwoGWAccounting(t, fr, vips, retransmitted)
	t.Logf("every Stop recorded %.2f s after the clients' daemon was told to stop", time.Since(stopped).Seconds())
	t.Logf("the whole test: %.1f s", time.Since(begin).Seconds())
}

// radiusCount is the gateway's ipsecd_radius_packets_total of kind
// (retransmission: requests sent again for want of an answer;
// accounting_response: Accounting-Requests answered).
func radiusCount(t *testing.T, ns *netns, kind string) int {
	t.Helper()
	m := regexp.MustCompile(`\nipsecd_radius_packets_total\{kind="` + kind + `",server="freeradius"\} (\d+)\n`).FindStringSubmatch(scrape(t, ns, "http://"+ikeMetricsAddr+"/metrics"))
	if m == nil {
		t.Fatalf("the gateway in %s has no %s counter", ns.name, kind)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// sameRecord tells whether a and b are one request recorded twice: every
// attribute equal but the time FreeRADIUS received it.
func sameRecord(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if k != "Timestamp" && b[k] != v {
			return false
		}
	}
	return true
}

// checkTwoGWAccounting waits for a Stop of each of the 102 sessions and
// checks the detail file: per Acct-Session-Id one Start and one Stop,
// of one NAS, user and address; each client's one session at its
// gateway, the mover's two at gw1 and gw2, each with octets both ways.
// FreeRADIUS keeps no answer to an Accounting-Request to repeat, so a
// request the gateway retransmitted (its answer was slow) may be
// recorded twice: a record may repeat only as itself, and no more often
// than the gateways retransmitted.
func checkTwoGWAccounting(t *testing.T, fr *radiustest.Server, vips map[string]netip.Addr, retransmitted int) {
	t.Helper()
	const sessions = twoGWClients + 2
	var recs []map[string]string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		recs = fr.Detail(t)
		stopped := map[string]bool{}
		for _, r := range recs {
			if r["Acct-Status-Type"] == "Stop" {
				stopped[r["Acct-Session-Id"]] = true
			}
		}
		if len(stopped) >= sessions {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions stopped in the detail file 20 s after the clients stopped; want %d", len(stopped), sessions)
		}
	}
	type session struct{ start, stop map[string]string }
	bySID := map[string]*session{}
	ons := map[string]int{}        // NAS-Identifier → its Accounting-Ons
	nasOf := map[string][]string{} // user → the NAS of each session, in order of Start
	repeats := 0
	for _, r := range recs {
		sid := r["Acct-Session-Id"]
		switch r["Acct-Status-Type"] {
		case "Start":
			if s := bySID[sid]; s != nil {
				if !sameRecord(s.start, r) || s.stop != nil {
					t.Fatalf("session %s started twice: %v, then %v", sid, s.start, r)
				}
				repeats++
				continue
			}
			bySID[sid] = &session{start: r}
			nasOf[r["User-Name"]] = append(nasOf[r["User-Name"]], r["NAS-Identifier"])
		case "Stop":
			s := bySID[sid]
			if s == nil {
				t.Fatalf("session %s: a Stop without a Start: %v", sid, r)
			}
			if s.stop != nil {
				if !sameRecord(s.stop, r) {
					t.Fatalf("session %s stopped twice: %v, then %v", sid, s.stop, r)
				}
				repeats++
				continue
			}
			s.stop = r
		case "Accounting-On":
			ons[r["NAS-Identifier"]]++
		case "Accounting-Off":
		default:
			t.Errorf("unexpected record %v", r)
		}
	}
	if len(bySID) != sessions {
		t.Fatalf("%d sessions in the detail file; want %d", len(bySID), sessions)
	}
	if repeats > retransmitted {
		t.Errorf("%d records repeated; the gateways retransmitted %d requests", repeats, retransmitted)
	}
	if ons["gw1"] != 1 || ons["gw2"] != 1 || len(ons) != 2 {
		t.Errorf("Accounting-On by NAS: %v; want one of gw1 and one of gw2", ons)
	}
	for sid, s := range bySID {
		user := s.start["User-Name"]
		for _, k := range []string{"User-Name", "NAS-Identifier", "Framed-IP-Address"} {
			if s.stop[k] != s.start[k] {
				t.Errorf("session %s: %s %q at Start, %q at Stop", sid, k, s.start[k], s.stop[k])
			}
		}
		if s.start["Framed-IP-Address"] != vips[user].String() {
			t.Errorf("session %s of %s: Framed-IP-Address %s; its virtual IP was %v", sid, user, s.start["Framed-IP-Address"], vips[user])
		}
		for _, k := range []string{"Acct-Input-Octets", "Acct-Output-Octets"} {
			if v, _ := strconv.Atoi(s.stop[k]); v == 0 {
				t.Errorf("session %s of %s: Stop with %s %q; want its traffic", sid, user, k, s.stop[k])
			}
		}
	}
	for i := range twoGWClients {
		id, _ := twoGWUser(i)
		if want := fmt.Sprintf("[gw%d]", i%2+1); fmt.Sprint(nasOf[id]) != want {
			t.Errorf("%s's sessions were at %v; want %s", id, nasOf[id], want)
		}
	}
	if got := fmt.Sprint(nasOf[twoGWMoverID]); got != "[gw1 gw2]" {
		t.Errorf("the mover's sessions were at %s; want [gw1 gw2]", got)
	}
	t.Logf("accounting: %d sessions, each one Start and one Stop with octets, under its NAS (%d records repeated, of %d requests the gateways retransmitted)", len(bySID), repeats, retransmitted)
}
