//go:build linux

package ike

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/internal/charontest"
	"github.com/ipsecd/ipsecd/tun/netnstest"
)

// The strongSwan side of the interop tests: charon in a namespace of its
// own, driven with swanctl, and the keys it logs.

var (
	charonAddr = netip.MustParseAddrPort("192.0.2.1:500")
	driverAddr = netip.MustParseAddrPort("192.0.2.2:500")
)

type charon = charontest.Charon

// testConn is charon's side of the test connection: charon is a.test at
// 192.0.2.1 with 198.51.100.0/24, we are b.test at 192.0.2.2 with
// 203.0.113.0/24.
func testConn(ike, esp string) charontest.Conn {
	return charontest.Conn{LocalAddrs: "192.0.2.1", RemoteAddrs: "192.0.2.2", Proposals: ike,
		Local: charontest.Peer{ID: "a.test"}, Remote: charontest.Peer{ID: "b.test"},
		LocalTS: "198.51.100.0/24", RemoteTS: "203.0.113.0/24", ESP: esp}
}

// peerConfig is our side of testConn.
func peerConfig(t *testing.T, ike, esp string) *Config {
	_, cfg := pairConfigs(t, []string{ike}, []string{esp})
	return cfg
}

// loadTest loads testConn into charon.
func loadTest(ch *charon, ike, esp string) { ch.Load(testConn(ike, esp).String()) }

// charonPair starts charon in one namespace and a driver on ports 500
// and 4500 in another, joined by a veth pair: charon at 192.0.2.1, the
// driver at 192.0.2.2. It skips the test without root or strongSwan.
func charonPair(t *testing.T) (*charon, *driver) {
	ch, d, _, _ := charonNamespaces(t)
	return ch, d
}

// charonPairWith is charonPair with extra lines in charon's section of
// strongswan.conf.
func charonPairWith(t *testing.T, extra string) (*charon, *driver) {
	ch, d, _, _ := charonNamespacesWith(t, extra)
	return ch, d
}

// charonNamespaces is charonPair that also returns charon's namespace and
// the driver's.
func charonNamespaces(t *testing.T) (*charon, *driver, *netnstest.NS, *netnstest.NS) {
	return charonNamespacesWith(t, "")
}

func charonNamespacesWith(t *testing.T, extra string) (*charon, *driver, *netnstest.NS, *netnstest.NS) {
	charontest.Require(t)
	return charonNamespacesStart(t, charontest.Start, extra)
}

// charonNamespacesStart is charonNamespacesWith with the charon that
// start starts (charontest.Start, or StartSid for strongSwan 6).
func charonNamespacesStart(t *testing.T, start func(testing.TB, string, string) *charon, extra string) (*charon, *driver, *netnstest.NS, *netnstest.NS) {
	nsC := netnstest.New(t, "ike-charon")
	nsG := netnstest.New(t, "ike-driver")
	nsC.IP(t, "link", "add", "vc", "type", "veth", "peer", "name", "vg", "netns", nsG.Name)
	nsC.IP(t, "addr", "add", "192.0.2.1/24", "dev", "vc")
	nsG.IP(t, "addr", "add", "192.0.2.2/24", "dev", "vg")
	nsC.IP(t, "link", "set", "vc", "up")
	nsG.IP(t, "link", "set", "vg", "up")
	// kernel-libipsec routes remote_ts into its TUN device from an
	// address of local_ts, and needs a route to the peer's side to do it.
	nsC.IP(t, "addr", "add", "198.51.100.1/32", "dev", "lo")
	nsC.IP(t, "route", "add", "default", "via", "192.0.2.2")
	ch := start(t, nsC.Name, extra)

	var c500, c4500 *net.UDPConn
	if err := nsG.Do(func() (err error) {
		if c500, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(driverAddr)); err != nil {
			return err
		}
		c4500, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(driverAddr.Addr(), NATTPort)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c500.Close(); c4500.Close() })
	d := newDriver(c500, c4500)
	return ch, d, nsC, nsG
}

// checkKeys compares keys we derived with those charon logged after
// offset from.
func checkKeys(t *testing.T, ch *charon, from int, pairs ...any) {
	t.Helper()
	for i := 0; i < len(pairs); i += 2 {
		name, ours := pairs[i].(string), pairs[i+1].([]byte)
		theirs := ch.Key(from, name)
		if theirs == nil {
			t.Fatalf("charon's log has no %q", name)
		}
		if !bytes.Equal(theirs, ours) {
			t.Errorf("%s: charon logged %x, we derived %x", name, theirs, ours)
		}
	}
}

func checkChildKeys(t *testing.T, ch *charon, from int, c *Child) {
	t.Helper()
	checkKeys(t, ch, from, "encryption initiator key", c.InitiatorKeys.Enc, "encryption responder key", c.ResponderKeys.Enc)
	if c.Suite.Integ.Name != "" {
		checkKeys(t, ch, from, "integrity initiator key", c.InitiatorKeys.Integ, "integrity responder key", c.ResponderKeys.Integ)
	}
}

// listed checks that charon lists our current IKE SA ESTABLISHED with
// our child installed.
func (d *driver) listed(t *testing.T, ch *charon) {
	t.Helper()
	// charon may still be deleting the SAs a rekey replaced: serve and
	// look again for up to two seconds.
	var list string
	for i := 0; i < 20; i++ {
		list, _ = ch.Swanctl("--list-sas")
		if strings.Count(list, "INSTALLED") == 1 && strings.Count(list, "ESTABLISHED") == 1 {
			break
		}
		stop := time.Now().Add(100 * time.Millisecond)
		d.serve(func() bool { return time.Now().After(stop) })
	}
	ispi, rspi := d.sa.SPIs()
	if !strings.Contains(list, "ESTABLISHED") || !strings.Contains(list, fmt.Sprintf("%016x_i", ispi)) || !strings.Contains(list, fmt.Sprintf("%016x_r", rspi)) {
		t.Fatalf("charon does not list our IKE SA %016x_i %016x_r as ESTABLISHED:\n%s", ispi, rspi, list)
	}
	if len(d.sa.Children()) != 1 {
		t.Fatalf("we have %d children, want 1", len(d.sa.Children()))
	}
	c := d.sa.Children()[0]
	if !strings.Contains(list, fmt.Sprintf("in  %08x,", c.OutSPI)) || !strings.Contains(list, fmt.Sprintf("out %08x,", c.InSPI)) {
		t.Fatalf("charon does not list the child with SPIs in %08x, out %08x:\n%s", c.OutSPI, c.InSPI, list)
	}
	if strings.Count(list, "INSTALLED") != 1 || strings.Count(list, "ESTABLISHED") != 1 {
		t.Fatalf("charon lists old SAs besides the current ones:\n%s", list)
	}
}

// establish brings our IKE SA with cfg and its child up with charon, with
// us as role ("initiator" or "responder": charon initiates).
func (d *driver) establish(t *testing.T, ch *charon, cfg *Config, role string) {
	t.Helper()
	d.reset(cfg)
	if role == "responder" {
		d.while(t, ch, d.up, "--initiate", "--child", "net", "--timeout", "10")
		return
	}
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	if err := d.serve(d.up); err != nil {
		t.Fatal(err)
	}
}

// establishChecked is establish, then checks that charon lists our SAs
// and logged the keys we derived. It returns where charon's log stood
// before.
func (d *driver) establishChecked(t *testing.T, ch *charon, cfg *Config, role string) (from int) {
	t.Helper()
	from = ch.LogSize()
	d.establish(t, ch, cfg, role)
	d.listed(t, ch)
	checkKeys(t, ch, from, "Sk_ei secret", d.sa.Keys().EI, "Sk_er secret", d.sa.Keys().ER)
	checkChildKeys(t, ch, from, d.sa.Children()[0])
	return from
}

// rekeyChild has charon (ours false) or us rekey the one child, waits
// until the new child replaced it and no request of ours is outstanding,
// and checks the new keys against charon's.
func (d *driver) rekeyChild(t *testing.T, ch *charon, ours bool) {
	t.Helper()
	old := d.sa.Children()[0]
	from := ch.LogSize()
	rekeyed := func() bool {
		cs := d.sa.Children()
		return len(cs) == 1 && cs[0].Replaces == old && d.sa.NextTimeout().IsZero()
	}
	if !ours {
		d.while(t, ch, rekeyed, "--rekey", "--child", "net")
	} else {
		d.ask(t, rekeyed, func(now time.Time) ([]byte, error) { return d.sa.RekeyChild(old, now) })
	}
	checkChildKeys(t, ch, from, d.sa.Children()[0])
}

// rekeyIKEBothWays has charon rekey the IKE SA, then us, and checks
// after each that our new keys are charon's and charon lists our SAs.
func (d *driver) rekeyIKEBothWays(t *testing.T, ch *charon) {
	t.Helper()
	for _, ours := range []bool{false, true} {
		prev := d.sa
		from := ch.LogSize()
		newSA := func() bool { return d.sa != prev && prev.State() == StateDeleted }
		if ours {
			d.ask(t, newSA, d.sa.RekeyIKE)
		} else {
			d.while(t, ch, newSA, "--rekey", "--ike", "test")
		}
		checkKeys(t, ch, from, "Sk_ei secret", d.sa.Keys().EI, "Sk_er secret", d.sa.Keys().ER)
		d.listed(t, ch)
	}
}

// fail lets the connection with cfg fail, with us as role, until failed
// reports true; as responder, charon's initiate must fail too.
func (d *driver) fail(t *testing.T, ch *charon, cfg *Config, role string, failed func() bool) {
	t.Helper()
	d.reset(cfg)
	if role == "initiator" {
		if err := d.start(); err != nil {
			t.Fatal(err)
		}
		if err := d.serve(failed); err != nil {
			t.Fatal(err)
		}
		return
	}
	rc := make(chan error, 1)
	go func() {
		_, err := ch.Swanctl("--initiate", "--child", "net", "--timeout", "10")
		rc <- err
	}()
	serr := d.serve(failed)
	if err := <-rc; err == nil || serr != nil {
		t.Fatalf("swanctl --initiate succeeded (%v) or we saw no failure (%v)", err, serr)
	}
}
