package ikenode

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/ike"
)

// halfOpenPeer is a host at addr:500 on n's network that talks IKE to a
// IKE daemon by hand: what the IKE daemon sends it is kept until it reads it.
type halfOpenPeer struct {
	bind Bind
	mu   sync.Mutex
	got  [][]byte
}

func newHalfOpenPeer(t *testing.T, n *testNet, addr netip.Addr) *halfOpenPeer {
	t.Helper()
	p := &halfOpenPeer{}
	b, err := n.mem.Listen([]netip.Addr{addr}, 500, func(b []byte, _, _ netip.AddrPort) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.got = append(p.got, b)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	p.bind = b
	return p
}

func (p *halfOpenPeer) take() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	got := p.got
	p.got = nil
	return got
}

// exchange initiates an IKE SA of ec with the IKE daemon at to and answers
// what comes back until there is nothing more, or, when initOnly, until
// the IKE_SA_INIT is answered (the SA half-open at the IKE daemon). The
// IKE_SA_INIT request goes twice, as a retransmission does.
func (p *halfOpenPeer) exchange(t *testing.T, n *testNet, ec *ike.Config, to netip.AddrPort, initOnly bool) *ike.SA {
	t.Helper()
	from := netip.AddrPortFrom(p.bind.(*memBind).addrs[0].Addr(), 500)
	ini, req, err := ike.Initiate(ec, from, to, n.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	send := func(b []byte) {
		if err := p.bind.Send(b, from.Addr(), to); err != nil {
			t.Fatal(err)
		}
	}
	send(req)
	send(req)
	for range 10 {
		n.settle(t)
		got := p.take()
		if len(got) == 0 {
			return ini
		}
		for _, d := range got {
			wasInit := ini.State() == ike.StateInitSent
			out, _ := ini.Handle(d, n.clock.Now())
			if out == nil || initOnly && wasInit && ini.State() != ike.StateInitSent {
				continue // the IKE_SA_INIT is answered: no IKE_AUTH
			}
			for _, o := range ini.Packets(out) {
				send(o)
			}
		}
	}
	t.Fatal("the exchange did not end")
	return nil
}

// TestHalfOpenCountsReturnToZero: the half-open counts behind
// ike.block_threshold and init_limit_half_open go back to 0 on every way
// out of the half-open state (IKE_AUTH completes, IKE_AUTH fails, the
// half-open SA times out, terminate, a reload removing its connection,
// the SA forgotten after its grace), with retransmitted IKE_SA_INITs
// counted once, and match what the SAs themselves say at each step: a
// count left behind would lock the address out for good once it
// reached block_threshold.
func TestHalfOpenCountsReturnToZero(t *testing.T) {
	n := newTestNet()
	parse := func(name string) *config.Config {
		y := strings.Replace(fmt.Sprintf(responderYAML, "cookie_threshold: 0, block_threshold: 3"), "name: any", "name: "+name, 1)
		cfg, err := config.Parse("test.yaml", []byte(y))
		if err != nil {
			t.Fatal(err)
		}
		cfg.IKE.Port = 0
		return cfg
	}
	cfg := parse("any")
	b := startDaemon(t, n, Config{IKE: &cfg.IKEConfig, RawESP: true, Listen: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}, 0)
	to := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), b.m.Port())
	good := initiatorConfig(t)
	bad := *good
	bad.PSK = []byte("not the pre-shared key of b.test!")

	check := func(step string, want int) {
		t.Helper()
		n.settle(t)
		var total, index, addrs, indexed, sas int
		if err := b.m.do(func() {
			total, _ = halfOpenIn(b.m)
			index, addrs = b.m.index.halfOpen, len(b.m.index.halfOpenFrom)
			indexed, sas = len(b.m.index.bySPIs), len(b.m.sas)
		}); err != nil {
			t.Fatal(err)
		}
		if total != want || index != want || (want == 0) != (addrs == 0) || indexed != sas {
			t.Fatalf("%s: %d half-open SAs, the index counts %d from %d addresses and holds %d of %d SAs; want %d",
				step, total, index, addrs, indexed, sas, want)
		}
	}

	// Each way out, from an address of its own, three times: with
	// block_threshold 3, a count left behind would show as a drop.
	for i, way := range []struct {
		name string
		run  func(p *halfOpenPeer)
	}{
		{"IKE_AUTH completes", func(p *halfOpenPeer) {
			if s := p.exchange(t, n, good, to, false); s.State() != ike.StateEstablished {
				t.Fatalf("IKE_AUTH: %v (%v)", s.State(), s.Err())
			}
		}},
		{"IKE_AUTH fails", func(p *halfOpenPeer) {
			if s := p.exchange(t, n, &bad, to, false); s.State() == ike.StateEstablished {
				t.Fatal("a wrong PSK got through")
			}
		}},
		{"timeout", func(p *halfOpenPeer) {
			p.exchange(t, n, good, to, true)
			check("half-open", 1)
			n.advance(t, ike.HalfOpenTimeout+tickEvery)
		}},
		{"terminate", func(p *halfOpenPeer) {
			p.exchange(t, n, good, to, true)
			check("half-open", 1)
			if err := b.m.Terminate(Target{IKE: b.m.connOrder[0]}); err != nil {
				t.Fatal(err)
			}
		}},
		{"reload", func(p *halfOpenPeer) {
			p.exchange(t, n, good, to, true)
			check("half-open", 1)
			name := "other"
			if b.m.connOrder[0] == name {
				name = "any"
			}
			if _, err := b.m.Reload(&parse(name).IKEConfig); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		p := newHalfOpenPeer(t, n, netip.AddrFrom4([4]byte{127, 0, 0, byte(10 + i)}))
		for k := range 4 {
			way.run(p)
			check(fmt.Sprintf("%s, %d", way.name, k+1), 0)
		}
	}
	// Forgotten after their grace: the index holds nothing of them.
	n.advance(t, 2*endedGrace)
	check("forgotten", 0)
	c := b.m.Counters()
	if c.Blocked != 0 || c.HalfOpenFull != 0 {
		t.Fatalf("%d IKE_SA_INITs dropped for block_threshold, %d for init_limit_half_open; want none", c.Blocked, c.HalfOpenFull)
	}
}
