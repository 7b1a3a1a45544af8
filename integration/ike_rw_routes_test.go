//go:build linux

package integration

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/internal/charontest"
)

// The "internet" behind the charon gateway in B: a third namespace at
// 203.0.113.2 and 2001:db8:c::2, which routes back through B.
const (
	internetGW4   = "203.0.113.1"
	internetHost4 = "203.0.113.2"
	internetGW6   = "2001:db8:c::1"
	internetHost6 = "2001:db8:c::2"
)

// rwRoutesNet is a road warrior (A, ipsecd) of a charon 5.9.8 gateway
// (B) that forwards to a host on the internet (C).
type rwRoutesNet struct {
	*pair
	c  *netns
	ch *charontest.Charon
}

// newRWRoutesNet builds the three namespaces and starts charon in B with
// a pool of 10.3.0.7 and fd00:3::7, offering localTS to alice
// (EAP-MSCHAPv2) against its certificate; it returns the CA file.
func newRWRoutesNet(t *testing.T, localTS string) (*rwRoutesNet, string) {
	t.Helper()
	n := &rwRoutesNet{pair: newPair(t), c: newNetns(t)}
	n.b.mustRun(t, "ip", "link", "add", "veth2", "type", "veth", "peer", "name", "veth3", "netns", n.c.name)
	n.b.mustRun(t, "ip", "addr", "add", internetGW4+"/24", "dev", "veth2")
	n.b.mustRun(t, "ip", "addr", "add", internetGW6+"/64", "dev", "veth2", "nodad")
	n.b.mustRun(t, "ip", "link", "set", "veth2", "up")
	n.b.mustRun(t, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	n.b.mustRun(t, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
	n.c.mustRun(t, "ip", "addr", "add", internetHost4+"/24", "dev", "veth3")
	n.c.mustRun(t, "ip", "addr", "add", internetHost6+"/64", "dev", "veth3", "nodad")
	n.c.mustRun(t, "ip", "link", "set", "veth3", "up")
	n.c.mustRun(t, "ip", "route", "add", "default", "via", internetGW4)
	n.c.mustRun(t, "ip", "-6", "route", "add", "default", "via", internetGW6)

	caFile, cert, dir := charonGatewayDir(t)
	n.ch = charontest.Start(t, n.b.name, "")
	n.ch.LoadDir(charontest.Conn{LocalAddrs: underlayB4, RemoteAddrs: underlayA4, Proposals: "aes256-sha256-x25519", Encap: true,
		Local: charontest.Peer{Auth: "pubkey", ID: "a.test", Certs: cert}, Remote: charontest.Peer{Auth: "eap-mschapv2", EAPID: "alice"},
		LocalTS: localTS, RemoteTS: "dynamic", ESP: "aes128gcm16", Pools: "rw, rw6", EAPSecret: "alice-mschapv2-pw",
		PoolsConf: "pools {\n  rw {\n    addrs = 10.3.0.7/32\n  }\n  rw6 {\n    addrs = fd00:3::7/128\n  }\n}\n"}.String(), dir)
	return n, caFile
}

// rwRoutesConfig is ipsecd's road warrior config: vips of both
// families, remote_ts as given, into ipsec1 with iface's extra keys.
func rwRoutesConfig(caFile, iface, underlay, remoteTS string) string {
	return fmt.Sprintf(`log: {level: debug}
underlay: {udp: "0.0.0.0:4500"%s}
interfaces:
  - {name: ipsec1, if_id: 1%s}
connections:
  - name: office
    local_addrs: [%s]
    remote_addrs: [%s]
    proposals: [aes256-sha256-x25519]
    vips: [0.0.0.0, "::"]
    local:  {auth: eap-mschapv2, id: roadwarrior.test, eap_id: alice}
    remote: {auth: pubkey, id: a.test, cacerts: [%s]}
    children:
      - {name: net, if_id: 1, local_ts: [dynamic], remote_ts: [%s], esp_proposals: [aes128gcm16], start_action: start}
secrets:
  - {type: eap, ids: [alice], secret: alice-mschapv2-pw}
`, underlay, iface, underlayA4, underlayB4, caFile, remoteTS)
}

// childPackets returns the packets out of office's child.
func childPackets(t *testing.T, d *daemon) uint64 {
	t.Helper()
	for _, s := range d.ikeList() {
		for _, c := range s.Children {
			if c.State == "INSTALLED" {
				return c.PacketsOut
			}
		}
	}
	t.Fatal("no installed child")
	return 0
}

// mustHave fails unless out holds every line of want, and none of not.
func mustHave(t *testing.T, what, out string, want, not []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, out)
		}
	}
	for _, w := range not {
		if strings.Contains(out, w) {
			t.Errorf("%s holds %q:\n%s", what, w, out)
		}
	}
}

// ours lists what ipsecd left in A's kernel: the lines of rules, and of
// routes in any table, of its protocol.
func (n *rwRoutesNet) ours(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, args := range [][]string{{"rule", "show"}, {"-6", "rule", "show"},
		{"route", "show", "table", "all"}, {"-6", "route", "show", "table", "all"}} {
		for _, line := range strings.Split(n.a.mustRun(t, "ip", args...), "\n") {
			if strings.Contains(line, "proto 90") {
				b.WriteString(line + "\n")
			}
		}
	}
	return b.String()
}

// TestRoadWarriorSplitTunnel: the real binary as a road warrior of a
// charon 5.9.8 gateway that offers 203.0.113.0/24: once the child is up,
// that prefix is routed into ipsec1 from the virtual IP 10.3.0.7,
// guarded, and pings to the host there go through ESP, while traffic to
// the gateway itself stays outside; when the IKE SA ends the route and
// its guard go, and a reconnect brings them back.
func TestRoadWarriorSplitTunnel(t *testing.T) {
	charontest.Require(t)
	n, caFile := newRWRoutesNet(t, "203.0.113.0/24")
	d := startDaemon(t, n.a, rwRoutesConfig(caFile, "", "", "203.0.113.0/24"))
	s := d.waitIKE("the child of 10.3.0.7", anyChild)
	if fmt.Sprint(s.Children[0].RemoteTS) != "[203.0.113.0/24]" {
		t.Fatalf("remote_ts %v, want 203.0.113.0/24", s.Children[0].RemoteTS)
	}
	mustHave(t, "ip route show dev ipsec1", n.a.mustRun(t, "ip", "route", "show", "dev", "ipsec1"), []string{"203.0.113.0/24 proto static scope link src 10.3.0.7"}, nil)
	mustHave(t, "ipsecd's routes", n.ours(t), []string{"unreachable 203.0.113.0/24 proto 90 metric 4294967295"}, []string{"rule", "throw"})
	before := childPackets(t, d)
	ping(t, n.a, internetHost4, 3)
	if got := childPackets(t, d) - before; got < 3 {
		t.Errorf("the child carried %d packets of the pings to %s, want 3 or more", got, internetHost4)
	}
	before = childPackets(t, d)
	ping(t, n.a, underlayB4, 3)
	if got := childPackets(t, d) - before; got != 0 {
		t.Errorf("the child carried %d packets of the pings to the gateway %s, want none", got, underlayB4)
	}
	d.mustCtl(t, "ike", "terminate", "--ike", "office")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out := n.a.mustRun(t, "ip", "route", "show", "table", "all")
		if !strings.Contains(out, "203.0.113.0/24") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the terminate A still routes 203.0.113.0/24:\n%s", out)
		}
	}

	// A reconnect: the route and its guard come back, and the pings go
	// through ESP again.
	d.mustCtl(t, "ike", "initiate", "--ike", "office")
	d.waitIKE("the child of 10.3.0.7 again", anyChild)
	mustHave(t, "ip route show dev ipsec1 after the reconnect", n.a.mustRun(t, "ip", "route", "show", "dev", "ipsec1"), []string{"203.0.113.0/24 proto static scope link src 10.3.0.7"}, nil)
	before = childPackets(t, d)
	ping(t, n.a, internetHost4, 2)
	if got := childPackets(t, d) - before; got < 2 {
		t.Errorf("after the reconnect the child carried %d packets of the pings, want 2 or more", got)
	}
	if strings.Contains(d.log.String(), "removing the child's route") {
		t.Errorf("the daemon warned removing a route")
	}
}

// TestRoadWarriorFullTunnel: the real binary as a road warrior of a
// charon 5.9.8 gateway that offers everything (0.0.0.0/0 and ::/0),
// into a table of its own (table 220, rule_priority 220) with the
// underlay's mark. The host on the internet behind the gateway is
// reached through the tunnel from both virtual IPs, across a child and
// an IKE rekey, while the gateway's own address stays outside it (a
// throw route, and the rule skips the underlay's marked packets). After
// a stop nothing of it is left; after a SIGKILL the rules, the guards
// and the throw route stay (what the tunnel carried is refused, not sent
// in clear), and the next start cleans what its config no longer wants.
func TestRoadWarriorFullTunnel(t *testing.T) {
	charontest.Require(t)
	n, caFile := newRWRoutesNet(t, "0.0.0.0/0, ::/0")
	// A host's own default route, which the full tunnel overrides and
	// the gateway's address keeps using.
	n.a.mustRun(t, "ip", "route", "add", "default", "via", underlayB4)
	n.a.mustRun(t, "ip", "-6", "route", "add", "default", "via", underlayB6)
	cfg := func(prio int) string {
		return rwRoutesConfig(caFile, fmt.Sprintf(", table: 220, rule_priority: %d", prio), ", mark: 0x100", `0.0.0.0/0, "::/0"`)
	}
	d := startDaemon(t, n.a, cfg(220))
	up := func(what string) {
		t.Helper()
		s := d.waitIKE(what, anyChild)
		if fmt.Sprint(s.LocalVIPs) != "[10.3.0.7 fd00:3::7]" || fmt.Sprint(s.Children[0].RemoteTS) != "[0.0.0.0/0 ::/0]" {
			t.Fatalf("%s: virtual IPs %v, remote_ts %v; want 10.3.0.7 and fd00:3::7, everything", what, s.LocalVIPs, s.Children[0].RemoteTS)
		}
	}
	up("the full tunnel")
	mustHave(t, "ip rule", n.a.mustRun(t, "ip", "rule", "show"), []string{"220:\tnot from all fwmark 0x100 lookup 220 proto 90"}, nil)
	mustHave(t, "ip -6 rule", n.a.mustRun(t, "ip", "-6", "rule", "show"), []string{"220:\tnot from all fwmark 0x100 lookup 220 proto 90"}, nil)
	mustHave(t, "table 220", n.a.mustRun(t, "ip", "route", "show", "table", "220"), []string{
		"default dev ipsec1 proto static scope link src 10.3.0.7",
		"unreachable default proto 90 metric 4294967295",
		"throw 192.0.2.2 proto 90"}, nil)
	mustHave(t, "table 220 (IPv6)", n.a.mustRun(t, "ip", "-6", "route", "show", "table", "220"), []string{
		"default dev ipsec1 proto static src fd00:3::7",
		"unreachable default dev lo proto 90 metric 4294967295"}, []string{"throw"})
	mustHave(t, "the main table", n.a.mustRun(t, "ip", "route", "show"), []string{"default via 192.0.2.2 dev veth0"}, []string{"ipsec1"})
	mustHave(t, "the route to the gateway", n.a.mustRun(t, "ip", "route", "get", underlayB4), []string{"dev veth0"}, []string{"ipsec1"})
	mustHave(t, "the route to the internet", n.a.mustRun(t, "ip", "route", "get", internetHost4), []string{"dev ipsec1 table 220 src 10.3.0.7"}, nil)

	through := func(what string) {
		t.Helper()
		before := childPackets(t, d)
		ping(t, n.a, internetHost4, 3)
		ping(t, n.a, internetHost6, 3)
		if got := childPackets(t, d) - before; got < 6 {
			t.Errorf("%s: the child carried %d packets of the pings to %s and %s, want 6 or more", what, got, internetHost4, internetHost6)
		}
		before = childPackets(t, d)
		ping(t, n.a, underlayB4, 2)
		if got := childPackets(t, d) - before; got != 0 {
			t.Errorf("%s: the child carried %d packets of the pings to the gateway, want none", what, got)
		}
	}
	through("up")
	for _, target := range [][]string{{"--child", "net"}, {"--ike", "office"}} {
		old := d.ikeList()[0]
		d.mustCtl(t, append([]string{"ike", "rekey"}, target...)...)
		d.waitIKE("the rekeyed "+target[1], func(s control.IKESAInfo, c control.IKEChildInfo) bool {
			return c.SPIIn != old.Children[0].SPIIn || s.SPIInitiator != old.SPIInitiator
		})
		through("after a rekey of " + target[1])
	}

	// A clean stop leaves nothing.
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	if got := n.ours(t); got != "" {
		t.Errorf("after a stop, ipsecd left:\n%s", got)
	}
	if out := n.a.mustRun(t, "ip", "route", "show", "table", "220"); out != "" {
		t.Errorf("after a stop, table 220 holds:\n%s", out)
	}

	// A crash leaves the rules, guards and throw route: what the tunnel
	// carried is refused, the gateway still reached.
	d.start()
	up("the full tunnel again")
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	d.waitExit(t, 5*time.Second)
	mustHave(t, "after SIGKILL", n.ours(t), []string{"lookup 220 proto 90", "unreachable default", "throw 192.0.2.2"}, nil)
	if out, err := n.a.run("ping", "-n", "-c", "1", "-W", "1", internetHost4); err == nil {
		t.Errorf("after SIGKILL the internet host answered in clear:\n%s", out)
	}
	ping(t, n.a, underlayB4, 1)

	// The next start, with the rule moved to 221, removes the old rules
	// and the stale throw route and guard, and brings its own.
	if err := os.WriteFile(d.cfgPath, []byte(d.file(cfg(221))), 0o600); err != nil {
		t.Fatal(err)
	}
	mustHave(t, "ipsecd check", n.a.mustRun(t, ipsecdBin, "check", "--config", d.cfgPath), []string{
		"road warrior rules and throw routes in this network namespace: 3; a start with this file keeps 0 and removes 3",
		"removes: ip rule priority 220 not fwmark 0x100 lookup 220 proto 90; ip -6 rule priority 220 not fwmark 0x100 lookup 220 proto 90; throw 192.0.2.2/32 table 220 proto 90"}, nil)
	d.start()
	up("the full tunnel after the crash")
	got := n.ours(t)
	mustHave(t, "after the restart", got, []string{"221:\tnot from all fwmark 0x100 lookup 220 proto 90"}, []string{"220:\t"})
	if c := strings.Count(got, "throw 192.0.2.2"); c != 1 {
		t.Errorf("after the restart: %d throw routes of the gateway, want 1:\n%s", c, got)
	}
	through("after the restart")
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	if got := n.ours(t); got != "" {
		t.Errorf("after the last stop, ipsecd left:\n%s", got)
	}
}

// TestRoadWarriorFullTunnelNoMark: the full tunnel with an underlay that
// marks nothing: the rule sends every packet to table 220, and the
// throw route of the gateway alone keeps IKE and ESP outside the tunnel
// they carry, across a child rekey. With fail_closed.keep_on_stop a
// stop keeps the rules, the guards and the throw route: the internet
// is refused, the gateway reached, until the next start brings the
// tunnel back (one rule of each family, one throw route).
func TestRoadWarriorFullTunnelNoMark(t *testing.T) {
	charontest.Require(t)
	n, caFile := newRWRoutesNet(t, "0.0.0.0/0")
	n.a.mustRun(t, "ip", "route", "add", "default", "via", underlayB4)
	d := startDaemon(t, n.a, rwRoutesConfig(caFile, ", table: 220, rule_priority: 220", "", "0.0.0.0/0")+"fail_closed: {keep_on_stop: true}\n")
	old := d.waitIKE("the full tunnel", anyChild)
	mustHave(t, "ip rule", n.a.mustRun(t, "ip", "rule", "show"), []string{"220:\tfrom all lookup 220 proto 90"}, []string{"fwmark"})
	mustHave(t, "the route to the gateway", n.a.mustRun(t, "ip", "route", "get", underlayB4), []string{"dev veth0"}, []string{"ipsec1"})
	before := childPackets(t, d)
	ping(t, n.a, internetHost4, 3)
	if got := childPackets(t, d) - before; got < 3 {
		t.Errorf("the child carried %d packets of the pings to %s, want 3 or more", got, internetHost4)
	}
	d.mustCtl(t, "ike", "rekey", "--child", "net")
	d.waitIKE("the rekeyed child", func(_ control.IKESAInfo, c control.IKEChildInfo) bool { return c.SPIIn != old.Children[0].SPIIn })
	ping(t, n.a, internetHost4, 3)

	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	mustHave(t, "after a stop with keep_on_stop", n.ours(t), []string{"220:\tfrom all lookup 220 proto 90", "unreachable default table 220 proto 90", "throw 192.0.2.2 table 220 proto 90"}, nil)
	if out, err := n.a.run("ping", "-n", "-c", "1", "-W", "1", internetHost4); err == nil {
		t.Errorf("after a stop with keep_on_stop the internet host answered in clear:\n%s", out)
	}
	ping(t, n.a, underlayB4, 1)
	d.start()
	d.waitIKE("the full tunnel again", anyChild)
	ping(t, n.a, internetHost4, 3)
	got := n.ours(t)
	for line, want := range map[string]int{"220:\tfrom all lookup 220 proto 90": 2, "throw 192.0.2.2 table 220 proto 90": 1} {
		if c := strings.Count(got, line); c != want {
			t.Errorf("after the restart: %d of %q, want %d (IPv4 and IPv6 rules, one throw route):\n%s", c, line, want, got)
		}
	}
}
