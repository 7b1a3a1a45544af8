package stack

import (
	"net/netip"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/sa"
)

var (
	lo4  = [2]netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")}
	lo6  = [2]netip.Addr{netip.MustParseAddr("::1"), netip.MustParseAddr("::1")}
	doc4 = [2]netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")}
	doc6 = [2]netip.Addr{netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")}
)

// transportUDPMax is the largest datagram sent in transport mode: one
// that netstack does not fragment. Transport mode refuses inner fragments
// (package sa counts them as XfrmOutStateModeError), so only tunnel mode
// carries larger ones.
const transportUDPMax = 1300

// TestTraffic is the in-process test tier (docs/design.md): two netstacks joined
// over loopback UDP carry TCP (checksummed, both ways at once) and UDP
// (echoed, so both ways) through ESP, in every suite, in tunnel mode with
// IPv4 and IPv6 inner addresses, and in transport mode over IPv4
// (127.0.0.1 and 127.0.0.2) and, as root, IPv6 (two addresses in a
// network namespace of the test's: the host's loopback has only ::1).
func TestTraffic(t *testing.T) {
	type tcase struct {
		name   string
		mode   sa.Mode
		outer  [2]netip.Addr
		inner  [2]netip.Addr
		udpMax int
		ns     bool
	}
	cases := []tcase{
		{"tunnel/inner-v4", sa.ModeTunnel, lo4, doc4, 9000, false},
		{"tunnel/inner-v6", sa.ModeTunnel, lo4, doc6, 9000, false},
		{"transport/v4", sa.ModeTransport, lo4, lo4, transportUDPMax, false},
		{"transport/v6", sa.ModeTransport, doc6, doc6, transportUDPMax, true},
	}
	size := int64(64 << 20)
	if testing.Short() {
		size = 4 << 20
	}
	for _, s := range suites {
		for _, c := range cases {
			t.Run(s.Name+"/"+c.name, func(t *testing.T) {
				spec := pairSpec{suite: s, mode: c.mode, outer: c.outer, inner: c.inner}
				if c.ns {
					spec.newNet = inNamespace(t, c.outer[:])
				}
				p := startPair(t, spec)
				start := time.Now()
				exchangeTCP(t, p, size, 120*time.Second)
				el := time.Since(start)
				exchangeUDP(t, p, c.udpMax)
				t.Logf("TCP %d MiB each way in %v (%.0f Mbit/s each way)", size>>20, el.Round(time.Millisecond), float64(size*8)/el.Seconds()/1e6)
			})
		}
	}
	t.Run("aes-gcm-128/tunnel/outer-v6", func(t *testing.T) {
		p := startPair(t, pairSpec{suite: suites[0], mode: sa.ModeTunnel, outer: lo6, inner: doc4})
		exchangeTCP(t, p, size, 120*time.Second)
		exchangeUDP(t, p, 9000)
	})
}

// TestOffloadsInUse checks lesson 3 of docs/design.md end to end: netstack
// hands the endpoint TCP super-packets, which are split (not sent whole
// or refused), the sealed segments leave in UDP GSO sends, and the
// receiving netstack gets fewer, coalesced packets (GRO) than ESP
// delivered.
func TestOffloadsInUse(t *testing.T) {
	p := startPair(t, pairSpec{suite: suites[0], mode: sa.ModeTunnel, outer: lo4, inner: doc4})
	exchangeTCP(t, p, 8<<20, 60*time.Second)
	for i, n := range p.nets {
		ep := n.link.ep
		if got := ep.splits.Load(); got == 0 {
			t.Errorf("side %d: no super-packet split: netstack does not use host GSO", i)
		}
		if got := ep.sizeDrops.Load() + ep.queueDrops.Load(); got != 0 {
			t.Errorf("side %d: %d packets dropped by the endpoint, want 0", i, got)
		}
		if got := n.conn.Counters().TxGSO; got == 0 {
			t.Errorf("side %d: no UDP GSO send", i)
		}
		delivered := n.Interface().Stats().RxPackets
		nic := n.link.s.NICInfo()[nicID].Stats.Rx.Packets.Value()
		if nic*2 > delivered {
			t.Errorf("side %d: netstack received %d packets of %d opened: GRO coalesced less than 2 to 1", i, nic, delivered)
		}
		t.Logf("side %d: %d super-packets split, %d GSO segments sent, %d packets opened, %d after GRO", i, ep.splits.Load(), n.conn.Counters().TxGSO, delivered, nic)
	}
}
