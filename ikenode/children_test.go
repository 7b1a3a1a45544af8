package ikenode

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/sa"
)

// childrenYAML is a connection with three children of different traffic
// selectors (%[5]s and %[6]s: our and the peer's first two octets).
const childrenYAML = `interfaces:
  - {name: ipsec1, if_id: 1, addresses: [%[5]s.1.1/24], routes: [%[6]s.0.0/16]}
connections:
  - name: peer
    local_addrs: ["%[1]s"]
    remote_addrs: ["%[2]s"]
    proposals: [aes128gcm16-prfsha256-x25519]
    local: {auth: psk, id: %[3]s}
    remote: {auth: psk, id: %[4]s}
    children:
      - {name: one, if_id: 1, local_ts: [%[5]s.1.0/24], remote_ts: [%[6]s.1.0/24], esp_proposals: [aes128gcm16], start_action: %[7]s}
      - {name: two, if_id: 1, local_ts: [%[5]s.2.0/24], remote_ts: [%[6]s.2.0/24], esp_proposals: [aes256gcm16], start_action: %[8]s}
      - {name: three, if_id: 1, local_ts: [%[5]s.3.0/24], remote_ts: [%[6]s.3.0/24], esp_proposals: [aes128gcm16-x25519], start_action: %[9]s, mode: transport}
secrets:
  - {ids: [a.test, b.test], secret: "0x0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20"}
`

// childrenSide is one side of childrenYAML; start are the children's
// start_action, one for all or one each.
func childrenSide(t *testing.T, local, remote, lid, rid, net, rnet string, start ...string) *config.Config {
	t.Helper()
	if len(start) == 1 {
		start = []string{start[0], start[0], start[0]}
	}
	cfg, err := config.Parse("test.yaml", []byte(fmt.Sprintf(childrenYAML, local, remote, lid, rid, net, rnet, start[0], start[1], start[2])))
	if err != nil {
		t.Fatal(err)
	}
	cfg.IKE.Port = 0
	return cfg
}

// childSPIs returns e's children by name: name -> inbound SPI, for its
// one IKE SA (nil when it has not exactly one).
func childSPIs(e *endpoint) map[string]string {
	l, _ := e.m.List()
	if len(l) != 1 || l[0].State != "ESTABLISHED" {
		return nil
	}
	out := map[string]string{}
	for _, c := range l[0].Children {
		if _, dup := out[c.Name]; dup {
			out[c.Name] = "twice"
			continue
		}
		out[c.Name] = c.SPIIn
	}
	return out
}

func names(m map[string]string) []string {
	var n []string
	for k := range m {
		n = append(n, k)
	}
	slices.Sort(n)
	return n
}

// TestSeveralChildren: a connection with three children of different
// selectors (and different ESP proposals and modes) comes up with all
// three under one IKE SA, the first in IKE_AUTH and the others by
// CREATE_CHILD_SA; each is listed by name, and terminated, rekeyed and
// initiated on its own (from either side) while the others stay as
// they are.
func TestSeveralChildren(t *testing.T) {
	n := newTestNet()
	b := startEndpoint(t, n, childrenSide(t, "127.0.0.2", "127.0.0.1", "b.test", "a.test", "10.2", "10.1", "none"), "127.0.0.2", 0, 0x2000)
	a := startEndpoint(t, n, childrenSide(t, "127.0.0.1", "127.0.0.2", "a.test", "b.test", "10.1", "10.2", "start"), "127.0.0.1", b.m.Port(), 0x1000)
	all := []string{"one", "three", "two"}
	up := func(want []string) func() bool {
		return func() bool {
			sa, sb := childSPIs(a), childSPIs(b)
			return slices.Equal(names(sa), want) && slices.Equal(names(sb), want) && matched(a.node, b.node, len(want))
		}
	}
	n.waitFor(t, "three children up", func() bool { return up(all)() })
	if strings.Contains(a.log.String(), "children configured") {
		t.Error("the log still warns that only the first child is negotiated")
	}
	l := list(t, a)[0]
	for _, c := range l.Children {
		want := map[string]string{"one": "aes128gcm16-noesn", "two": "aes256gcm16-noesn", "three": "aes128gcm16-x25519-noesn"}[c.Name]
		mode := map[string]string{"three": "TRANSPORT"}[c.Name]
		if mode == "" {
			mode = "TUNNEL"
		}
		if c.Algorithms != want || c.Mode != mode || len(c.LocalTS) != 1 || c.LocalTS[0] != "10.1."+map[string]string{"one": "1", "two": "2", "three": "3"}[c.Name]+".0/24" {
			t.Errorf("A lists child %s as %+v: want %s, %s, its own selectors", c.Name, c, want, mode)
		}
	}
	before := childSPIs(a)

	// One terminated by A: the others stay.
	if err := a.m.Terminate(Target{Child: "two"}); err != nil {
		t.Fatal(err)
	}
	n.waitFor(t, "child two gone on both sides", up([]string{"one", "three"}))
	if got := childSPIs(a); got["one"] != before["one"] || got["three"] != before["three"] {
		t.Errorf("terminating two changed the others: %v, before %v", got, before)
	}

	// One rekeyed by B: the others stay.
	bBefore := childSPIs(b)
	if err := b.m.Rekey(Target{Child: "three"}); err != nil {
		t.Fatal(err)
	}
	n.waitFor(t, "child three rekeyed", func() bool {
		got := childSPIs(b)
		return up([]string{"one", "three"})() && got["three"] != bBefore["three"] && got["one"] == bBefore["one"]
	})

	// Two brought back by B under the IKE SA A made.
	if err := b.m.Initiate(Target{Child: "two"}); err != nil {
		t.Fatal(err)
	}
	n.waitFor(t, "child two up again", up(all))
	if l := list(t, b); len(l) != 1 || l[0].Initiator {
		t.Errorf("B lists %+v: want the one IKE SA, that A initiated", l)
	}
	if err := b.m.Initiate(Target{Child: "two"}); err == nil {
		t.Error("initiating child two while it is up: no error")
	}

	// The IKE SA's rekey keeps all three.
	spi := list(t, a)[0].SPIInitiator
	if err := a.m.Rekey(Target{IKE: "peer"}); err != nil {
		t.Fatal(err)
	}
	n.waitFor(t, "the IKE rekey", func() bool {
		l, _ := a.m.List()
		return len(l) == 1 && l[0].SPIInitiator != spi && l[0].State == "ESTABLISHED" && up(all)()
	})
}

// TestTrapChildUnderIKESA: start_action is each child's. Of three
// children, the first (start) comes up alone; traffic for the second
// (trap) brings it up under the same IKE SA by CREATE_CHILD_SA, once;
// the third (none) stays down.
func TestTrapChildUnderIKESA(t *testing.T) {
	n := newTestNet()
	b := startEndpoint(t, n, childrenSide(t, "127.0.0.2", "127.0.0.1", "b.test", "a.test", "10.2", "10.1", "none"), "127.0.0.2", 0, 0x2000)
	cfgA := childrenSide(t, "127.0.0.1", "127.0.0.2", "a.test", "b.test", "10.1", "10.2", "start", "trap", "none")
	a := startDaemon(t, n, Config{IKE: &cfgA.IKEConfig, RawESP: true, PeerPort: b.m.Port(), Trap: true,
		Listen: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}, 0x1000)
	one := func() bool { return slices.Equal(names(childSPIs(a)), []string{"one"}) && matched(a.node, b.node, 1) }
	n.waitFor(t, "child one", one)
	a.node.mu.Lock()
	pol := slices.Clone(a.node.policies)
	a.node.mu.Unlock()
	want := sa.Policy{Dir: sa.DirOut, IfID: 1, Selector: sa.Selector{Src: netip.MustParsePrefix("10.1.2.0/24"), Dst: netip.MustParsePrefix("10.2.2.0/24")}, Action: sa.ActionAllow}
	if len(pol) != 1 || pol[0] != want {
		t.Fatalf("trap policies %+v, want only child two's %+v", pol, want)
	}
	for range 3 {
		a.m.Acquire(1, netip.MustParseAddr("10.1.2.5"), netip.MustParseAddr("10.2.2.7"))
	}
	n.waitFor(t, "child two", func() bool {
		return slices.Equal(names(childSPIs(a)), []string{"one", "two"}) && slices.Equal(names(childSPIs(b)), []string{"one", "two"}) && matched(a.node, b.node, 2)
	})
	n.advance(t, 5*time.Second)
	if got := names(childSPIs(a)); !slices.Equal(got, []string{"one", "two"}) || len(list(t, a)) != 1 {
		t.Errorf("after three acquires: children %v under %d IKE SAs; want one and two under one", got, len(list(t, a)))
	}
}

// TestDPDActionPerChild: dpd_action is each child's. Of three children
// up, the peer dies; one and three (restart) come up again together under
// one new IKE SA with the restarted peer, two (clear) does not.
func TestDPDActionPerChild(t *testing.T) {
	n := newTestNet()
	side := func(local, remote, lid, rid, net, rnet, start string, dpd bool) *config.Config {
		y := fmt.Sprintf(childrenYAML, local, remote, lid, rid, net, rnet, start, start, start)
		if dpd {
			y = strings.Replace(y, "    proposals:", "    dpd_delay: 1s\n    proposals:", 1)
			for name, action := range map[string]string{"one": "restart", "two": "clear", "three": "restart"} {
				y = strings.Replace(y, "{name: "+name+",", "{name: "+name+", dpd_action: "+action+",", 1)
			}
		}
		cfg, err := config.Parse("test.yaml", []byte(y))
		if err != nil {
			t.Fatal(err)
		}
		cfg.IKE.Port = 0
		cfg.IKE.Retransmit = ike.Retransmit{Timeout: 200 * time.Millisecond, Base: 1, Tries: 2}
		return cfg
	}
	b := startEndpoint(t, n, side("127.0.0.2", "127.0.0.1", "b.test", "a.test", "10.2", "10.1", "none", false), "127.0.0.2", 0, 0x2000)
	a := startEndpoint(t, n, side("127.0.0.1", "127.0.0.2", "a.test", "b.test", "10.1", "10.2", "start", true), "127.0.0.1", b.m.Port(), 0x1000)
	n.waitFor(t, "three children", func() bool { return len(childSPIs(a)) == 3 && matched(a.node, b.node, 3) })
	first := list(t, a)[0]
	b.m.Close() // dead: its sockets are gone, it sends no delete
	n.waitFor(t, "A to notice", func() bool { return strings.Contains(a.log.String(), "dpd_action restart") })
	cfg := side("127.0.0.2", "127.0.0.1", "b.test", "a.test", "10.2", "10.1", "none", false)
	cfg.IKE.Port = b.m.Port()
	b2 := startEndpoint(t, n, cfg, "127.0.0.2", 0, 0x3000)
	n.waitFor(t, "one and three again under a new IKE SA", func() bool {
		l, _ := a.m.List()
		return len(l) == 1 && l[0].SPIInitiator != first.SPIInitiator && slices.Equal(names(childSPIs(a)), []string{"one", "three"}) && matched(a.node, b2.node, 2)
	})
	n.advance(t, 5*time.Second)
	if got := names(childSPIs(a)); !slices.Equal(got, []string{"one", "three"}) {
		t.Errorf("children %v after the restart, want one and three (two's dpd_action is clear)", got)
	}
}
