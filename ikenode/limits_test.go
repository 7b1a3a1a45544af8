package ikenode

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/ike/message"
)

// responderYAML is a responder on 127.0.0.1 for any peer, with the ike:
// settings given.
const responderYAML = `interfaces:
  - {name: ipsec1, if_id: 1, addresses: [10.2.0.1/24], routes: [10.1.0.0/24]}
ike: {%s}
connections:
  - name: any
    local_addrs: [127.0.0.1]
    remote_addrs: ["%%any"]
    proposals: [aes128gcm16-prfsha256-x25519]
    local: {auth: psk, id: b.test}
    remote: {auth: psk, id: "%%any"}
    children:
      - {name: net, if_id: 1, local_ts: [10.2.0.0/24], remote_ts: [10.1.0.0/24], esp_proposals: [aes128gcm16]}
secrets:
  - {ids: [a.test, b.test], secret: "0x0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20"}
`

// newResponder makes an IKE daemon of responderYAML that the test drives by
// calling handle and tick itself (no Run).
func newResponder(t *testing.T, ikeSettings string) *Daemon {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(fmt.Sprintf(responderYAML, ikeSettings)))
	if err != nil {
		t.Fatal(err)
	}
	cfg.IKE.Port = 0
	m, err := New(Config{IKE: &cfg.IKEConfig, Node: newFakeNode(0), RawESP: true, Listen: []netip.Addr{netip.MustParseAddr("127.0.0.1")}, Transport: newMemNet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// initiatorConfig is the engine config of a peer a.test of
// newResponder's connection.
func initiatorConfig(t *testing.T) *ike.Config {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(fmt.Sprintf(sideYAML, "127.0.0.2", "127.0.0.1", "a.test", "b.test", "10.1.0", "10.2.0", "none", "4h", "0s", "clear", "1h")))
	if err != nil {
		t.Fatal(err)
	}
	ec, err := cfg.EngineConfig("peer", "net")
	if err != nil {
		t.Fatal(err)
	}
	return ec
}

// echoingInit has m take an IKE_SA_INIT request from src, as a host that
// receives at src sends it: when m answers with a cookie, the request
// again with that cookie.
func echoingInit(t *testing.T, m *Daemon, ec *ike.Config, src netip.Addr, now time.Time) {
	t.Helper()
	local := netip.MustParseAddrPort("127.0.0.1:500")
	from := netip.AddrPortFrom(src, 500)
	ini, req, err := ike.Initiate(ec, from, local, now)
	if err != nil {
		t.Fatal(err)
	}
	if reply, pass := m.cookies.Check(req, from, m.index.halfOpen, now); !pass {
		m.handle(packet{b: req, local: local, remote: from}, now) // answered with that cookie
		if req, err = ini.Handle(reply, now); err != nil || req == nil {
			t.Fatalf("echoing the cookie: %v", err)
		}
		if m, _ := message.Parse(req); len(m.Payloads) == 0 || m.Payloads[0].Type != message.TypeN {
			t.Fatal("the request does not echo the cookie")
		}
	}
	m.handle(packet{b: req, local: local, remote: from}, now)
}

// halfOpenIn counts m's responder SAs waiting for IKE_AUTH, by walking
// them (what the index counts without walking).
func halfOpenIn(m *Daemon) (total int, from map[netip.Addr]int) {
	from = map[netip.Addr]int{}
	for _, x := range m.sas {
		if !x.ended && x.sa.State() == ike.StateInitDone {
			total++
			_, r := x.sa.Addrs()
			from[r.Addr()]++
		}
	}
	return total, from
}

// TestHalfOpenLimits: one host that echoes cookies sends 200
// IKE_SA_INIT requests; it gets ike.block_threshold (5) half-open SAs,
// the rest is dropped and counted. Then hosts at ten more addresses
// do the same until init_limit_half_open (20) are half-open in all;
// what comes after is dropped and counted. Once the half-open SAs time
// out, a request passes again.
func TestHalfOpenLimits(t *testing.T) {
	m := newResponder(t, "cookie_threshold: 2, init_limit_half_open: 20")
	ec := initiatorConfig(t)
	now := time.Now()
	src := netip.MustParseAddr("127.0.0.3")
	for range 200 {
		echoingInit(t, m, ec, src, now)
	}
	total, from := halfOpenIn(m)
	c := m.Counters()
	if total != config.DefaultBlockThreshold || from[src] != total || c.Blocked != 200-uint64(total) || c.Cookies == 0 {
		t.Fatalf("200 IKE_SA_INITs from one address echoing cookies: %d half-open, %d blocked, %d cookies; want %d half-open, %d blocked, cookies asked",
			total, c.Blocked, c.Cookies, config.DefaultBlockThreshold, 200-config.DefaultBlockThreshold)
	}
	for i := range 10 {
		for range 5 {
			echoingInit(t, m, ec, netip.AddrFrom4([4]byte{127, 0, 0, byte(4 + i)}), now)
		}
	}
	total, _ = halfOpenIn(m)
	c = m.Counters()
	if total != 20 || c.HalfOpenFull != 50-15 || c.Blocked != 195 || m.index.halfOpen != total {
		t.Fatalf("then 5 each from 10 more addresses: %d half-open (index: %d), %d dropped for the total, %d blocked; want 20, 35, 195",
			total, m.index.halfOpen, c.HalfOpenFull, c.Blocked)
	}
	// The half-open SAs time out; the address may try again.
	later := now.Add(ike.HalfOpenTimeout + time.Second)
	m.tick(later)
	m.tick(later.Add(endedGrace + time.Second))
	if total, _ = halfOpenIn(m); total != 0 || m.index.halfOpen != 0 || len(m.index.halfOpenFrom) != 0 || len(m.index.bySPIs) != len(m.sas) {
		t.Fatalf("after the timeout: %d half-open, index %d (%d addresses), %d SAs indexed of %d", total, m.index.halfOpen, len(m.index.halfOpenFrom), len(m.index.bySPIs), len(m.sas))
	}
	echoingInit(t, m, ec, src, later)
	if total, _ = halfOpenIn(m); total != 1 {
		t.Fatalf("after the timeout a request made %d half-open SAs, want 1", total)
	}
}

// BenchmarkFind is the lookup of a datagram's IKE SA with n IKE SAs on
// their way (as a flood of IKE_SA_INITs leaves them): it must not grow
// with n.
func BenchmarkFind(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			cfg, _ := config.Parse("test.yaml", []byte(fmt.Sprintf(sideYAML, "127.0.0.2", "127.0.0.1", "a.test", "b.test", "10.1.0", "10.2.0", "none", "4h", "0s", "clear", "1h")))
			ec, _ := cfg.EngineConfig("peer", "net")
			m := &Daemon{index: newSAIndex()}
			c := &conn{ec: ec}
			now := time.Now()
			for i := range n {
				s, _, err := ike.Initiate(ec, netip.MustParseAddrPort("127.0.0.2:500"), netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), 500), now)
				if err != nil {
					b.Fatal(err)
				}
				m.add(s, c, now)
			}
			// A datagram for none of them: what a flood sends.
			h := message.Header(message.Encode(&message.Message{HeaderFields: message.HeaderFields{ISPI: 1, Exchange: message.IKEAuth}}))
			remote := netip.MustParseAddr("192.0.2.9")
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if m.index.find(h, remote) != nil {
					b.Fatal("found an SA")
				}
			}
		})
	}
}

// TestIKESAsPerPeer: the peer a.test makes 8 IKE SAs of one connection,
// one after the other (each with its child; the first alone says
// INITIAL_CONTACT). B keeps ike.max_ike_sas_per_peer (5) of them, the
// newest, and deletes the older ones with their children; A learns of
// it by the deletes.
func TestIKESAsPerPeer(t *testing.T) {
	a, b := pairUp(t, sideOpts{}, sideOpts{})
	count := func(e *endpoint) (n int) {
		for _, s := range list(t, e) {
			if s.State == "ESTABLISHED" {
				n++
			}
		}
		return n
	}
	const made = 8
	for i := range made {
		if err := a.m.do(func() {
			if err := a.m.initiate(a.m.conns["peer"], nil, a.m.clock.Now()); err != nil {
				t.Error(err)
			}
		}); err != nil {
			t.Fatal(err)
		}
		a.net.waitFor(t, fmt.Sprintf("IKE SA %d up on B", i+1), func() bool {
			return strings.Count(b.log.String(), "ike: IKE SA established") == i+1 && strings.Count(a.log.String(), "ike: child installed") == i+1
		})
	}
	want := config.DefaultMaxIKESAsPerPeer
	a.net.settle(t) // A learns of B's deletes
	in, _ := b.node.snapshot()
	if n := count(b); n != want || len(in) != want {
		t.Fatalf("%d IKE SAs of one peer identity made: B holds %d with %d children; want %d", made, n, len(in), want)
	}
	if n := count(a); n != want {
		t.Fatalf("A holds %d IKE SAs after B's deletes, want %d", n, want)
	}
}
