package ikenode

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/ike/keys"
	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/ike/proposal"
	"github.com/ipsecd/ipsecd/internal/syncbuf"
	"github.com/ipsecd/ipsecd/node"
	"github.com/ipsecd/ipsecd/sa"
)

// fakeNode records what an IKE daemon installs, in order, and checks what a
// node.Node checks of it: pairs of an inbound and an outbound SA, no SA
// twice, removals of SAs that exist.
type fakeNode struct {
	mu       sync.Mutex
	states   map[node.StateID]sa.Config
	order    []change
	spis     map[uint32]bool
	next     uint32
	policies []sa.Policy
	// sent, when set, reads the IKE daemon's datagrams sent; sentAt holds
	// its value at each change of order.
	sent   func() uint64
	sentAt []uint64
	// moved holds the SetPeer calls.
	moved []moved
	// fail, when set, refuses every InstallChild and AddState.
	fail error
}

// changeOp is what a change did.
type changeOp int

const (
	opInstall changeOp = iota + 1 // InstallChild: a pair
	opAdd                         // AddState
	opRemove                      // RemoveStates, one SA
)

// change is one change a fakeNode saw.
type change struct {
	op  changeOp
	dir sa.Dir // opAdd, opRemove
	spi uint32 // opInstall: the inbound SA's
	out uint32 // opInstall: the outbound SA's
}

func (c change) String() string {
	switch c.op {
	case opInstall:
		return fmt.Sprintf("install %08x %08x", c.spi, c.out)
	case opAdd:
		return fmt.Sprintf("add %s %08x", c.dir, c.spi)
	case opRemove:
		return fmt.Sprintf("remove %s %08x", c.dir, c.spi)
	}
	return fmt.Sprintf("change %d", c.op)
}

// is reports whether c is an op, in dir for opAdd and opRemove.
func (c change) is(op changeOp, dir sa.Dir) bool {
	return c.op == op && (op == opInstall || c.dir == dir)
}

// moved is one SetPeer call.
type moved struct {
	spi  uint32
	peer netip.AddrPort
}

// note records one change.
func (f *fakeNode) note(c change) {
	f.order = append(f.order, c)
	if f.sent != nil {
		f.sentAt = append(f.sentAt, f.sent())
	} else {
		f.sentAt = append(f.sentAt, 0)
	}
}

func newFakeNode(base uint32) *fakeNode {
	return &fakeNode{states: map[node.StateID]sa.Config{}, spis: map[uint32]bool{}, next: base}
}

func clone(c sa.Config) sa.Config {
	for _, a := range []**sa.Algorithm{&c.AEAD, &c.Enc, &c.Auth} {
		if *a != nil {
			cp := **a
			cp.Key = slices.Clone(cp.Key)
			*a = &cp
		}
	}
	return c
}

func (f *fakeNode) addLocked(c sa.Config) error {
	id := idOf(&c)
	if _, ok := f.states[id]; ok {
		return fmt.Errorf("%s: %w", id, sa.ErrExists)
	}
	f.states[id] = clone(c)
	f.note(change{op: opAdd, dir: c.Dir, spi: c.SPI})
	return nil
}

func (f *fakeNode) InstallChild(owner node.Owner, in, out sa.Config, replaces ...node.StateID) error {
	defer in.ClearKeys()
	defer out.ClearKeys()
	f.mu.Lock()
	defer f.mu.Unlock()
	if owner != node.OwnerIKE || in.Dir != sa.DirIn || out.Dir != sa.DirOut || len(replaces) != 0 {
		return fmt.Errorf("bad InstallChild(%s, %s, %s, %v)", owner, in.Dir, out.Dir, replaces)
	}
	if f.fail != nil {
		return f.fail
	}
	if err := f.addLocked(in); err != nil {
		return err
	}
	delete(f.spis, in.SPI)
	if err := f.addLocked(out); err != nil {
		return err
	}
	// One change for both: the order shows them as one step.
	f.order, f.sentAt = f.order[:len(f.order)-2], f.sentAt[:len(f.sentAt)-2]
	f.note(change{op: opInstall, spi: in.SPI, out: out.SPI})
	return nil
}

func (f *fakeNode) AddState(owner node.Owner, c sa.Config) error {
	defer c.ClearKeys()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	return f.addLocked(c)
}

func (f *fakeNode) RemoveStates(owner node.Owner, ids ...node.StateID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		if _, ok := f.states[id]; !ok {
			return fmt.Errorf("%s: %w", id, sa.ErrNotFound)
		}
		delete(f.states, id)
		f.note(change{op: opRemove, dir: id.Dir, spi: id.SPI})
	}
	return nil
}

func (f *fakeNode) AddPolicy(owner node.Owner, p sa.Policy) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if slices.Contains(f.policies, p) {
		return sa.ErrExists
	}
	f.policies = append(f.policies, p)
	return nil
}

func (f *fakeNode) DeletePolicy(p sa.Policy) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := slices.Index(f.policies, p)
	if i < 0 {
		return sa.ErrNotFound
	}
	f.policies = slices.Delete(f.policies, i, i+1)
	return nil
}

func (f *fakeNode) AllocSPI() (uint32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	f.spis[f.next] = true
	return f.next, nil
}

func (f *fakeNode) ReleaseSPI(spi uint32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.spis, spi)
}

// reserved returns the SPIs AllocSPI gave that are neither installed nor
// released.
func (f *fakeNode) reserved() []uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var spis []uint32
	for spi := range f.spis {
		spis = append(spis, spi)
	}
	return spis
}

// snapshot returns the installed SAs by direction and SPI.
func (f *fakeNode) snapshot() (in, out map[uint32]sa.Config) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in, out = map[uint32]sa.Config{}, map[uint32]sa.Config{}
	for id, c := range f.states {
		if id.Dir == sa.DirIn {
			in[id.SPI] = c
		} else {
			out[id.SPI] = c
		}
	}
	return in, out
}

func (f *fakeNode) events() []change {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.order)
}

// side is a config for one of two IKE daemons on loopback.
const sideYAML = `interfaces:
  - {name: ipsec1, if_id: 1, addresses: [%[5]s.1/24], routes: [%[6]s.0/24]}
connections:
  - name: peer
    local_addrs: ["%[1]s"]
    remote_addrs: ["%[2]s"]
    proposals: [aes128gcm16-prfsha256-x25519]
    rekey_time: %[8]s
    dpd_delay: %[9]s
    local: {auth: psk, id: %[3]s}
    remote: {auth: psk, id: %[4]s}
    children:
      - name: net
        if_id: 1
        local_ts: [%[5]s.0/24]
        remote_ts: [%[6]s.0/24]
        esp_proposals: [aes128gcm16, aes128-sha256-x25519]
        start_action: %[7]s
        dpd_action: %[10]s
        rekey_time: %[11]s
secrets:
  - {ids: [a.test, b.test], secret: "0x0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20"}
`

type sideOpts struct {
	proposals            string // IKE, in place of sideYAML's aes128gcm16-prfsha256-x25519
	start, dpdAction     string
	ikeRekey, childRekey string
	dpdDelay             string
	retransmit           time.Duration
}

func (o sideOpts) fill() sideOpts {
	if o.start == "" {
		o.start = "none"
	}
	if o.dpdAction == "" {
		o.dpdAction = "clear"
	}
	if o.ikeRekey == "" {
		o.ikeRekey = "4h"
	}
	if o.childRekey == "" {
		o.childRekey = "1h"
	}
	if o.dpdDelay == "" {
		o.dpdDelay = "0s"
	}
	return o
}

// endpoint is one IKE daemon with its fake node and log.
type endpoint struct {
	net  *testNet // nil: the system clock and UDP sockets
	m    *Daemon
	node *fakeNode
	log  *syncbuf.Buffer
	stop func()
	// ev records what Config.OnEvent was told.
	ev *eventRecorder
}

func parseSide(t testing.TB, local, remote, lid, rid, net, rnet string, o sideOpts) *config.Config {
	t.Helper()
	o = o.fill()
	y := fmt.Sprintf(sideYAML, local, remote, lid, rid, net, rnet, o.start, o.ikeRekey, o.dpdDelay, o.dpdAction, o.childRekey)
	if o.proposals != "" {
		y = strings.Replace(y, "aes128gcm16-prfsha256-x25519", o.proposals, 1)
	}
	cfg, err := config.Parse("test.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	cfg.IKE.Port = 0
	if o.retransmit != 0 {
		cfg.IKE.Retransmit = ike.Retransmit{Timeout: o.retransmit, Base: 1, Tries: 2}
	}
	return cfg
}

func startEndpoint(t testing.TB, n *testNet, cfg *config.Config, local string, peerPort uint16, base uint32) *endpoint {
	t.Helper()
	return startDaemon(t, n, Config{IKE: &cfg.IKEConfig, RawESP: true, PeerPort: peerPort, Listen: []netip.Addr{netip.MustParseAddr(local)}}, base)
}

// startDaemon runs an IKE daemon of c (its Node a fake, its log kept) until
// the test ends, on n's clock and network (nil: the system's and UDP).
func startDaemon(t testing.TB, n *testNet, c Config, base uint32) *endpoint {
	t.Helper()
	log := &syncbuf.Buffer{}
	l := logrus.New()
	l.SetOutput(log)
	l.SetLevel(logrus.DebugLevel)
	e := &endpoint{net: n, node: newFakeNode(base), log: log, ev: &eventRecorder{}}
	c.Node, c.Log = e.node, l
	if c.OnEvent == nil {
		c.OnEvent = e.ev.record
	}
	if n != nil {
		n.configure(&c)
	}
	m, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	m.linger = 0 // the tests count the changes of a rekey at once; TestLinger sets it
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	e.stop = func() { cancel(); <-done }
	if n != nil {
		n.add(m)
		// Run is in its loop, its ticker made: the clock moves no
		// timer of it unseen.
		if err := m.do(func() {}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		e.stop()
		if t.Failed() || os.Getenv("IKENODE_LOG") != "" {
			t.Logf("log of %v:\n%s", c.Listen, log.String())
		}
	})
	return e
}

// pairUp starts B (responder) at 127.0.0.2 and A at 127.0.0.1, which
// initiates when oa says start, on a manual clock and an in-memory
// network (a.net).
func pairUp(t testing.TB, oa, ob sideOpts) (a, b *endpoint) {
	t.Helper()
	return pairOn(t, newTestNet(), oa, ob)
}

// pairOn is pairUp on n's clock and network; nil is the system clock
// and UDP sockets on loopback.
func pairOn(t testing.TB, n *testNet, oa, ob sideOpts) (a, b *endpoint) {
	t.Helper()
	b = startEndpoint(t, n, parseSide(t, "127.0.0.2", "127.0.0.1", "b.test", "a.test", "10.2.0", "10.1.0", ob), "127.0.0.2", 0, 0x2000)
	a = startEndpoint(t, n, parseSide(t, "127.0.0.1", "127.0.0.2", "a.test", "b.test", "10.1.0", "10.2.0", oa), "127.0.0.1", b.m.Port(), 0x1000)
	return a, b
}

// waitForReal polls cond for up to 10 s: for IKE daemons on the system
// clock and UDP sockets.
func waitForReal(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// matched reports whether A's and B's SADs hold exactly mirrored pairs:
// each outbound SA of one is an inbound SA of the other with the same
// key, and there are want pairs.
func matched(a, b *fakeNode, want int) bool {
	ain, aout := a.snapshot()
	bin, bout := b.snapshot()
	if len(ain) != want || len(aout) != want || len(bin) != want || len(bout) != want {
		return false
	}
	for _, dir := range []struct{ out, in map[uint32]sa.Config }{{aout, bin}, {bout, ain}} {
		for spi, o := range dir.out {
			i, ok := dir.in[spi]
			if !ok || o.AEAD == nil || i.AEAD == nil || !bytes.Equal(o.AEAD.Key, i.AEAD.Key) || o.Src != i.Src || o.Dst != i.Dst {
				return false
			}
		}
	}
	return true
}

func list(t *testing.T, e *endpoint) []control.IKESAInfo {
	t.Helper()
	l, err := e.m.List()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func established(e *endpoint) bool {
	l, _ := e.m.List()
	return len(l) == 1 && l[0].State == "ESTABLISHED" && len(l[0].Children) == 1
}

// rekeyAndWait has e, A or B of one IKE SA with one child, rekey t, and
// waits until e lists the new IKE SA or the new child, matched on both
// sides.
func rekeyAndWait(t *testing.T, a, b, e *endpoint, tg Target) {
	t.Helper()
	before := list(t, e)[0]
	if err := e.m.Rekey(tg); err != nil {
		t.Fatal(err)
	}
	a.net.waitFor(t, "the rekey", func() bool {
		l, _ := e.m.List()
		if len(l) != 1 || l[0].State != "ESTABLISHED" || len(l[0].Children) != 1 {
			return false
		}
		if tg.IKE != "" {
			return l[0].SPIInitiator != before.SPIInitiator
		}
		return l[0].Children[0].SPIIn != before.Children[0].SPIIn && matched(a.node, b.node, 1)
	})
}

// TestUpRekeyDelete: A initiates at start; both sides install mirrored
// pairs with selectors and if_id; a child rekey from each side, and an
// IKE rekey, leave one mirrored pair each, installed before the old one
// goes; a terminate removes everything on both sides.
func TestUpRekeyDelete(t *testing.T) {
	a, b := pairUp(t, sideOpts{start: "start"}, sideOpts{})
	a.net.waitFor(t, "the first child", func() bool { return matched(a.node, b.node, 1) && established(a) && established(b) })
	_, aout := a.node.snapshot()
	for _, c := range aout {
		want := sa.Selector{Src: netip.MustParsePrefix("10.1.0.0/24"), Dst: netip.MustParsePrefix("10.2.0.0/24")}
		if c.Selector != want || c.IfID != 1 || c.Mode != sa.ModeTunnel || c.Src != netip.MustParseAddr("127.0.0.1") || c.Encap != nil {
			t.Errorf("A's outbound SA: %+v", c)
		}
	}
	l := list(t, a)[0]
	if !l.Initiator || l.RemoteID != "b.test" || l.LocalID != "a.test" || l.Children[0].Name != "net" || l.Children[0].Algorithms != "aes128gcm16-noesn" {
		t.Errorf("A lists %+v", l)
	}

	for _, step := range []struct {
		name string
		e    *endpoint
		t    Target
	}{{"child rekey by B", b, Target{Child: "net"}}, {"child rekey by A", a, Target{Child: "net"}}, {"IKE rekey by A", a, Target{IKE: "peer"}}, {"IKE rekey by B", b, Target{IKE: "peer"}}} {
		t.Run(step.name, func(t *testing.T) {
			na, nb := len(a.node.events()), len(b.node.events())
			rekeyAndWait(t, a, b, step.e, step.t)
			if step.t.Child == "" {
				if len(a.node.events()) != na || len(b.node.events()) != nb {
					t.Errorf("an IKE rekey changed the children: A %v, B %v", a.node.events()[na:], b.node.events()[nb:])
				}
				return
			}
			// Make-before-break: the side that rekeyed installs the new
			// pair at once; the other adds the new inbound SA, then
			// (when the old child's delete comes) the outbound SA; the
			// old pairs go last.
			initiator, responder := a, b
			if step.e == b {
				initiator, responder = b, a
			}
			n := map[*endpoint]int{a: na, b: nb}
			if ev := initiator.node.events()[n[initiator]:]; len(ev) != 3 || ev[0].op != opInstall || ev[1].op != opRemove {
				t.Errorf("the rekeying side's changes %v: want install, then two removes", ev)
			}
			if ev := responder.node.events()[n[responder]:]; len(ev) != 4 || !ev[0].is(opAdd, sa.DirIn) || !ev[1].is(opAdd, sa.DirOut) || ev[2].op != opRemove {
				t.Errorf("the other side's changes %v: want add in, add out, then two removes", ev)
			}
		})
	}

	if err := a.m.Terminate(Target{IKE: "peer"}); err != nil {
		t.Fatal(err)
	}
	a.net.waitFor(t, "both sides empty", func() bool {
		ain, _ := a.node.snapshot()
		bin, _ := b.node.snapshot()
		la, _ := a.m.List()
		lb, _ := b.m.List()
		return len(ain) == 0 && len(bin) == 0 && len(la) == 0 && len(lb) == 0
	})
	for _, e := range []*endpoint{a, b} {
		if r := e.node.reserved(); len(r) != 0 {
			t.Errorf("SPIs %x reserved after the last child went, want none", r)
		}
	}
	if err := a.m.Rekey(Target{IKE: "nope"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("rekey of an unknown connection: %v, want ErrNotFound", err)
	}
}

// TestUDPSockets: the IKE daemons as the daemon runs them, on UDP sockets
// bound to loopback addresses and the system clock, bring the child up
// and rekey it (the other tests run on an in-memory network and a
// manual clock).
func TestUDPSockets(t *testing.T) {
	a, b := pairOn(t, nil, sideOpts{start: "start"}, sideOpts{})
	waitForReal(t, "the first child", func() bool { return matched(a.node, b.node, 1) && established(a) && established(b) })
	if l := list(t, a); l[0].Local.Addr() != netip.MustParseAddr("127.0.0.1") || l[0].Remote != netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), b.m.Port()) {
		t.Errorf("A's IKE SA from %v to %v, want 127.0.0.1 to 127.0.0.2:%d", l[0].Local, l[0].Remote, b.m.Port())
	}
	first := list(t, b)[0]
	if err := a.m.Rekey(Target{Child: "net"}); err != nil {
		t.Fatal(err)
	}
	waitForReal(t, "the rekey", func() bool {
		l, _ := b.m.List()
		return len(l) == 1 && len(l[0].Children) == 1 && l[0].Children[0].SPIIn != first.Children[0].SPIIn && matched(a.node, b.node, 1)
	})
}

// TestResponderDefersOutbound: when the peer rekeys a child, our new
// outbound SA goes in only with the peer's delete of the old child: in
// the changes, the new inbound SA comes first, then the new outbound SA,
// and the old pair last.
func TestResponderDefersOutbound(t *testing.T) {
	a, b := pairUp(t, sideOpts{start: "start"}, sideOpts{})
	a.net.waitFor(t, "the first child", func() bool { return matched(a.node, b.node, 1) })
	nb := len(b.node.events())
	if err := a.m.Rekey(Target{Child: "net"}); err != nil {
		t.Fatal(err)
	}
	a.net.waitFor(t, "the rekey", func() bool { return len(b.node.events()) >= nb+3 && matched(a.node, b.node, 1) })
	ev := b.node.events()[nb:]
	if len(ev) != 4 || !ev[0].is(opAdd, sa.DirIn) || !ev[1].is(opAdd, sa.DirOut) || ev[2].op != opRemove || ev[3].op != opRemove {
		t.Errorf("B's changes %v: want the new inbound SA, the new outbound SA, then the old pair", ev)
	}
}

// TestTimers: rekey_time drives child and IKE rekeys on their own.
func TestTimers(t *testing.T) {
	a, b := pairUp(t, sideOpts{start: "start", childRekey: "1s", ikeRekey: "2s"}, sideOpts{childRekey: "1h", ikeRekey: "1h"})
	a.net.waitFor(t, "the first child", func() bool { return matched(a.node, b.node, 1) })
	first := list(t, a)[0]
	a.net.waitFor(t, "a timed child rekey and IKE rekey", func() bool {
		l, _ := a.m.List()
		for _, s := range l {
			if s.State == "ESTABLISHED" && len(s.Children) == 1 && s.SPIInitiator != first.SPIInitiator &&
				s.Children[0].SPIIn != first.Children[0].SPIIn && matched(a.node, b.node, 1) {
				return true
			}
		}
		return false
	})
}

// TestDPD: with dpd_delay, a peer that stops answering is noticed: with
// dpd_action clear the SAs go; the children are removed.
func TestDPD(t *testing.T) {
	a, b := pairUp(t, sideOpts{start: "start", dpdDelay: "1s", retransmit: 200 * time.Millisecond}, sideOpts{})
	a.net.waitFor(t, "the first child", func() bool { return matched(a.node, b.node, 1) })
	b.m.Close() // dead: its sockets are gone, it sends no delete
	a.net.waitFor(t, "A to clear the dead peer's SAs", func() bool {
		ain, aout := a.node.snapshot()
		l, _ := a.m.List()
		return len(ain) == 0 && len(aout) == 0 && len(l) == 0
	})
	if !bytes.Contains([]byte(a.log.String()), []byte("dpd_action clear")) {
		t.Errorf("no dpd_action line in the log")
	}
}

// TestDPDRestart: dpd_action restart initiates again, and once the peer
// is back (restarted, knowing nothing of the old SAs) a new pair replaces
// the dead one.
func TestDPDRestart(t *testing.T) {
	a, b := pairUp(t, sideOpts{start: "start", dpdDelay: "1s", dpdAction: "restart", retransmit: 200 * time.Millisecond}, sideOpts{})
	a.net.waitFor(t, "the first child", func() bool { return matched(a.node, b.node, 1) })
	first := list(t, a)[0]
	b.m.Close() // dead: its sockets are gone, it sends no delete
	a.net.waitFor(t, "A to notice", func() bool { return bytes.Contains([]byte(a.log.String()), []byte("dpd_action restart")) })
	cfg := parseSide(t, "127.0.0.2", "127.0.0.1", "b.test", "a.test", "10.2.0", "10.1.0", sideOpts{})
	cfg.IKE.Port = b.m.Port()
	b2 := startEndpoint(t, a.net, cfg, "127.0.0.2", 0, 0x3000)
	a.net.waitFor(t, "a new IKE SA with the restarted peer", func() bool {
		l, _ := a.m.List()
		return len(l) == 1 && l[0].SPIInitiator != first.SPIInitiator && matched(a.node, b2.node, 1)
	})
}

// TestInitialContact: a restarted peer's IKE_AUTH carries
// INITIAL_CONTACT (it holds no IKE SA with us, not counting the one it
// is negotiating), and the SA of its previous life is dropped with its
// children as soon as the new one is up; hasContact tells whether an
// established SA with a peer exists.
func TestInitialContact(t *testing.T) {
	a, b := pairUp(t, sideOpts{start: "start"}, sideOpts{})
	a.net.waitFor(t, "the first child", func() bool { return matched(a.node, b.node, 1) })
	old := list(t, b)[0]
	a.m.Close() // A dies without a delete
	cfg := parseSide(t, "127.0.0.1", "127.0.0.2", "a.test", "b.test", "10.1.0", "10.2.0", sideOpts{start: "start"})
	a2 := startEndpoint(t, b.net, cfg, "127.0.0.1", b.m.Port(), 0x5000)
	// The old SA lingers a while for late answers: ike list calls it
	// DELETING (it was not replaced by a rekey).
	var oldStates []string
	a.net.waitFor(t, "only the new SA and its pair in B", func() bool {
		l, _ := b.m.List()
		for _, x := range l {
			if x.SPIInitiator == old.SPIInitiator && x.State != "ESTABLISHED" && !slices.Contains(oldStates, x.State) {
				oldStates = append(oldStates, x.State)
			}
		}
		return len(l) == 1 && l[0].SPIInitiator != old.SPIInitiator && matched(a2.node, b.node, 1)
	})
	if len(oldStates) == 0 || slices.ContainsFunc(oldStates, func(s string) bool { return s != "DELETING" }) {
		t.Errorf("the dropped SA was listed as %q, want DELETING while it lingered", oldStates)
	}
	if !strings.Contains(b.log.String(), "INITIAL_CONTACT") {
		t.Errorf("B's log does not say the peer restarted:\n%s", b.log.String())
	}
	var had, hasOther bool
	if err := b.m.do(func() {
		had = b.m.hasContact(ike.MustParseIdentity("b.test"), ike.MustParseIdentity("a.test"))
		hasOther = b.m.hasContact(ike.MustParseIdentity("b.test"), ike.MustParseIdentity("c.test"))
	}); err != nil {
		t.Fatal(err)
	}
	if !had || hasOther {
		t.Errorf("hasContact: a.test %v, c.test %v; want true, false", had, hasOther)
	}
}

// TestKeylog: with ike.keylog both files get the negotiated keys in
// Wireshark's formats, mode 0600, and the start is warned about.
func TestKeylog(t *testing.T) {
	dir := t.TempDir()
	n := newTestNet()
	cfgB := parseSide(t, "127.0.0.2", "127.0.0.1", "b.test", "a.test", "10.2.0", "10.1.0", sideOpts{})
	cfgB.IKE.Keylog = dir + "/b-"
	b := startEndpoint(t, n, cfgB, "127.0.0.2", 0, 0x2000)
	cfgA := parseSide(t, "127.0.0.1", "127.0.0.2", "a.test", "b.test", "10.1.0", "10.2.0", sideOpts{start: "start"})
	cfgA.IKE.Keylog = dir // a directory: the files go in it
	a := startEndpoint(t, n, cfgA, "127.0.0.1", b.m.Port(), 0x1000)
	a.net.waitFor(t, "the child", func() bool { return matched(a.node, b.node, 1) })
	l := list(t, b)[0]
	for name, want := range map[string]string{
		KeylogIKEFile: l.SPIInitiator + "," + l.SPIResponder + ",",
		// Wireshark's esp_sa writes the SPI with 8 digits; ike list as ipsecd does.
		KeylogESPFile: `"IPv4","127.0.0.1","127.0.0.2","` + fmt.Sprintf("0x%08x", spiOf(t, l.Children[0].SPIIn)) + `","AES-GCM with 16 octet ICV [RFC4106]","0x`,
	} {
		path := dir + "/b-" + name
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(b), want) {
			t.Errorf("%s: %q, want it to start %q", name, b, want)
		}
		if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", name, fi.Mode())
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, KeylogESPFile)); err != nil || fi.Size() == 0 {
		t.Errorf("A's keylog in the directory %s: %v", dir, err)
	}
	if !strings.Contains(b.log.String(), "KEYLOG ON") {
		t.Errorf("keylog not warned about:\n%s", b.log.String())
	}
}

// TestQueueFullDrops: an IKE daemon that does not keep up drops what does not
// fit its queue and counts it; DeliverNonESP never blocks.
func TestQueueFullDrops(t *testing.T) {
	cfg := parseSide(t, "127.0.0.1", "127.0.0.2", "a.test", "b.test", "10.1.0", "10.2.0", sideOpts{})
	m, err := New(Config{IKE: &cfg.IKEConfig, Node: newFakeNode(0), RawESP: true, Listen: []netip.Addr{netip.MustParseAddr("127.0.0.1")}, Transport: newMemNet()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	msg := append([]byte{0, 0, 0, 0}, make([]byte, 28)...)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range inboxSize + 100 {
			m.DeliverNonESP(msg, netip.MustParseAddrPort("192.0.2.9:4500"), netip.MustParseAddr("192.0.2.1"))
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("DeliverNonESP blocked")
	}
	if got := m.Counters().QueueDrops; got != 100 {
		t.Errorf("QueueDrops = %d, want 100", got)
	}
}

// TestGarbage: thousands of random datagrams, some with an IKE header
// that names IKE_SA_INIT or the live SA's SPIs, on both paths (the IKE
// port and the non-ESP hook), leave the SA up and the daemon answering:
// a rekey still completes.
func TestGarbage(t *testing.T) {
	a, b := pairUp(t, sideOpts{start: "start"}, sideOpts{})
	a.net.waitFor(t, "the first child", func() bool { return matched(a.node, b.node, 1) })
	l := list(t, b)[0]
	// A third host on the network sends the garbage to B's IKE port.
	conn, err := a.net.mem.Listen([]netip.Addr{netip.MustParseAddr("127.0.0.9")}, 0, func([]byte, netip.AddrPort, netip.AddrPort) {})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	bPort := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), b.m.Port())
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		p := make([]byte, 28+r.IntN(200))
		for j := range p {
			p[j] = byte(r.Uint32())
		}
		p[17] = 0x20 // version 2.0
		switch i % 3 {
		case 0:
			p[18] = 34 // IKE_SA_INIT
			binary.BigEndian.PutUint32(p[24:], uint32(len(p)))
		case 1:
			binary.BigEndian.PutUint64(p[0:], binary.BigEndian.Uint64(mustHex(t, l.SPIInitiator)))
			binary.BigEndian.PutUint64(p[8:], binary.BigEndian.Uint64(mustHex(t, l.SPIResponder)))
			p[18] = byte(34 + r.IntN(4))
			binary.BigEndian.PutUint32(p[24:], uint32(len(p)))
		}
		conn.Send(p, netip.MustParseAddr("127.0.0.9"), bPort)
		b.m.DeliverNonESP(append([]byte{0, 0, 0, 0}, p...), netip.MustParseAddrPort("127.0.0.1:4500"), netip.MustParseAddr("127.0.0.2"))
		if i%200 == 0 {
			a.net.settle(t) // let the queue drain: garbage, not a flood
		}
	}
	if err := a.m.Rekey(Target{Child: "net"}); err != nil {
		t.Fatal(err)
	}
	a.net.waitFor(t, "a rekey after the garbage", func() bool {
		l2, _ := b.m.List()
		return len(l2) == 1 && len(l2[0].Children) == 1 && l2[0].Children[0].SPIIn != l.Children[0].SPIIn && matched(a.node, b.node, 1)
	})
	if strings.Contains(b.log.String(), "panicked") {
		t.Errorf("a message panicked:\n%s", b.log.String())
	}
	c := b.m.Counters()
	t.Logf("B's counters after the garbage: %+v", c)
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWrongPSK: a wrong PSK installs nothing on either side, counts one
// authentication failure on each, and start_action start tries again
// later.
func TestWrongPSK(t *testing.T) {
	n := newTestNet()
	cfgB := parseSide(t, "127.0.0.2", "127.0.0.1", "b.test", "a.test", "10.2.0", "10.1.0", sideOpts{})
	cfgB.Connections[0].PSK = config.Key("not the same secret at all, no")
	b := startEndpoint(t, n, cfgB, "127.0.0.2", 0, 0x2000)
	a := startEndpoint(t, n, parseSide(t, "127.0.0.1", "127.0.0.2", "a.test", "b.test", "10.1.0", "10.2.0", sideOpts{start: "start"}), "127.0.0.1", b.m.Port(), 0x1000)
	a.net.waitFor(t, "the failure on both sides", func() bool {
		return a.m.Counters().AuthFailures > 0 && b.m.Counters().AuthFailures > 0 && strings.Contains(a.log.String(), "retrying in 5s")
	})
	if fa, fb := a.m.Counters().AuthFailures, b.m.Counters().AuthFailures; fa != 1 || fb != 1 {
		t.Errorf("authentication failures: A %d, B %d; want 1 each", fa, fb)
	}
	for _, e := range []*endpoint{a, b} {
		if ev := e.node.events(); len(ev) != 0 {
			t.Errorf("installed after a wrong PSK: %v", ev)
		}
	}
}

// TestRekeyQueued: a rekey asked while another exchange is under way is
// not refused: it follows once that exchange is done.
func TestRekeyQueued(t *testing.T) {
	a, b := pairUp(t, sideOpts{start: "start"}, sideOpts{})
	a.net.waitFor(t, "the first child", func() bool { return matched(a.node, b.node, 1) })
	first := list(t, a)[0]
	if err := a.m.Rekey(Target{IKE: "peer"}); err != nil {
		t.Fatal(err)
	}
	if err := a.m.Rekey(Target{Child: "net"}); err != nil {
		t.Fatalf("a child rekey right after an IKE rekey: %v", err)
	}
	a.net.waitFor(t, "both rekeys", func() bool {
		l, _ := a.m.List()
		for _, s := range l {
			if s.State == "ESTABLISHED" && s.SPIInitiator != first.SPIInitiator && len(s.Children) == 1 &&
				s.Children[0].SPIIn != first.Children[0].SPIIn && matched(a.node, b.node, 1) {
				return true
			}
		}
		return false
	})
}

// TestTrap: with a node that raises acquires, start_action trap installs
// the child's allow out policy and initiates on the first acquire that
// matches it (interface and selectors), not on others; a reload that
// removes the connection removes the policy.
func TestTrap(t *testing.T) {
	n := newTestNet()
	b := startEndpoint(t, n, parseSide(t, "127.0.0.2", "127.0.0.1", "b.test", "a.test", "10.2.0", "10.1.0", sideOpts{}), "127.0.0.2", 0, 0x2000)
	cfgA := parseSide(t, "127.0.0.1", "127.0.0.2", "a.test", "b.test", "10.1.0", "10.2.0", sideOpts{start: "trap"})
	a := startDaemon(t, n, Config{IKE: &cfgA.IKEConfig, RawESP: true, PeerPort: b.m.Port(), Trap: true,
		Listen: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}, 0x1000)
	m, fa := a.m, a.node

	want := sa.Policy{Dir: sa.DirOut, IfID: 1, Selector: sa.Selector{Src: netip.MustParsePrefix("10.1.0.0/24"), Dst: netip.MustParsePrefix("10.2.0.0/24")}, Action: sa.ActionAllow}
	a.net.waitFor(t, "the trap policy", func() bool {
		fa.mu.Lock()
		defer fa.mu.Unlock()
		return len(fa.policies) == 1 && fa.policies[0] == want
	})
	m.Acquire(2, netip.MustParseAddr("10.1.0.5"), netip.MustParseAddr("10.2.0.7")) // another interface
	m.Acquire(1, netip.MustParseAddr("10.1.0.5"), netip.MustParseAddr("10.9.0.7")) // outside remote_ts
	a.net.settle(t)                                                                // the acquires were taken, and nothing followed
	if l, _ := m.List(); len(l) != 0 {
		t.Fatalf("an acquire the trap does not cover initiated: %+v", l)
	}
	m.Acquire(1, netip.MustParseAddr("10.1.0.5"), netip.MustParseAddr("10.2.0.7"))
	a.net.waitFor(t, "the trapped child", func() bool { return matched(fa, b.node, 1) })

	cfgNone, err := config.Parse("none.yaml", []byte("interfaces:\n  - {name: ipsec1, if_id: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Reload(&cfgNone.IKEConfig); err != nil {
		t.Fatal(err)
	}
	a.net.waitFor(t, "the policy and the child gone", func() bool {
		fa.mu.Lock()
		np := len(fa.policies)
		fa.mu.Unlock()
		in, _ := fa.snapshot()
		return np == 0 && len(in) == 0
	})
}

// TestInstallBeforeSend: what a message installs is in before the message
// that lets the peer use it leaves. A rekeys a child: A installs the new
// pair before it sends the delete of the old one (after which the peer
// sends on the new child); B adds the new inbound SA before its
// CREATE_CHILD_SA answer leaves, and the new outbound SA before its
// answer to the delete.
func TestInstallBeforeSend(t *testing.T) {
	a, b := pairUp(t, sideOpts{start: "start"}, sideOpts{})
	a.net.waitFor(t, "the first child", func() bool { return matched(a.node, b.node, 1) })
	var na, nb int
	var sa0, sb0 uint64
	if err := errors.Join(a.m.do(func() {
		a.node.sent = func() uint64 { return a.m.Counters().Sent }
		na, sa0 = len(a.node.events()), a.m.Counters().Sent
	}), b.m.do(func() {
		b.node.sent = func() uint64 { return b.m.Counters().Sent }
		nb, sb0 = len(b.node.events()), b.m.Counters().Sent
	})); err != nil {
		t.Fatal(err)
	}
	if err := a.m.Rekey(Target{Child: "net"}); err != nil {
		t.Fatal(err)
	}
	a.net.waitFor(t, "the rekey", func() bool { return len(a.node.events()) == na+3 && len(b.node.events()) == nb+4 })
	a.node.mu.Lock()
	b.node.mu.Lock()
	defer a.node.mu.Unlock()
	defer b.node.mu.Unlock()
	if got := a.node.sentAt[na]; got != sa0+1 {
		t.Errorf("A installed the new pair after %d datagrams, want %d (the request only, not yet the delete)", got-sa0, 1)
	}
	if got := b.node.sentAt[nb]; got != sb0 {
		t.Errorf("B added the new inbound SA after %d datagrams, want 0 (before its answer)", got-sb0)
	}
	if got := b.node.sentAt[nb+1]; got != sb0+1 {
		t.Errorf("B added the new outbound SA after %d datagrams, want 1 (its answer, not yet the one to the delete)", got-sb0)
	}
}

// TestWildcardIPv6: bound to the unspecified addresses (the daemon's
// default), IKE over IPv6 reads the local address from IPV6_PKTINFO and
// answers from it.
func TestWildcardIPv6(t *testing.T) {
	start := func(cfg *config.Config, peerPort uint16, base uint32) *endpoint {
		return startDaemon(t, nil, Config{IKE: &cfg.IKEConfig, RawESP: true, PeerPort: peerPort}, base)
	}
	b := start(parseSide(t, "::1", "::1", "b.test", "a.test", "10.2.0", "10.1.0", sideOpts{}), 0, 0x2000)
	a := start(parseSide(t, "::1", "::1", "a.test", "b.test", "10.1.0", "10.2.0", sideOpts{start: "start"}), b.m.Port(), 0x1000)
	waitForReal(t, "a child over IPv6", func() bool { return matched(a.node, b.node, 1) })
	_, out := a.node.snapshot()
	for _, c := range out {
		if c.Src != netip.MustParseAddr("::1") || c.Dst != netip.MustParseAddr("::1") {
			t.Errorf("outer addresses %s -> %s, want ::1", c.Src, c.Dst)
		}
	}
}

// TestStopWipesPSK: the IKE daemon's copies of the PSKs are zeroed when it
// stops; a reload zeroes those of the connections it replaces.
func TestStopWipesPSK(t *testing.T) {
	cfg := parseSide(t, "127.0.0.1", "127.0.0.2", "a.test", "b.test", "10.1.0", "10.2.0", sideOpts{})
	e := startEndpoint(t, newTestNet(), cfg, "127.0.0.1", 0, 0x1000)
	var old []byte
	if err := e.m.do(func() { old = e.m.conns["peer"].ec.PSK }); err != nil {
		t.Fatal(err)
	}
	changed := parseSide(t, "127.0.0.1", "127.0.0.2", "a.test", "b.test", "10.1.0", "10.2.0", sideOpts{dpdDelay: "5s"})
	if _, err := e.m.Reload(&changed.IKEConfig); err != nil {
		t.Fatal(err)
	}
	var now []byte
	if err := e.m.do(func() { now = e.m.conns["peer"].ec.PSK }); err != nil {
		t.Fatal(err)
	}
	e.stop()
	for name, k := range map[string][]byte{"replaced": old, "at stop": now} {
		if len(k) == 0 || !bytes.Equal(k, make([]byte, len(k))) {
			t.Errorf("PSK %s: %x, want zeroes", name, k)
		}
	}
}

// TestLinger: the inbound SA of a child the peer deleted (after its
// rekey) stays a while for packets still on the way, then goes.
func TestLinger(t *testing.T) {
	a, b := pairUp(t, sideOpts{start: "start"}, sideOpts{})
	a.net.waitFor(t, "the first child", func() bool { return matched(a.node, b.node, 1) })
	if err := b.m.do(func() { b.m.linger = 500 * time.Millisecond }); err != nil {
		t.Fatal(err)
	}
	oldIn, _ := b.node.snapshot()
	if err := a.m.Rekey(Target{Child: "net"}); err != nil {
		t.Fatal(err)
	}
	a.net.waitFor(t, "B's new outbound SA", func() bool { _, out := b.node.snapshot(); _, ok := out[0x1002]; return ok && len(out) == 1 })
	in, _ := b.node.snapshot()
	for spi := range oldIn {
		if _, ok := in[spi]; !ok {
			t.Errorf("B removed the old inbound SA %08x at once", spi)
		}
	}
	b.net.advance(t, 400*time.Millisecond)
	if in, _ := b.node.snapshot(); len(in) != 2 {
		t.Errorf("B has %d inbound SAs 400 ms after the rekey, want the old one lingering beside the new one", len(in))
	}
	b.net.advance(t, 300*time.Millisecond)
	if !matched(a.node, b.node, 1) {
		in, _ := b.node.snapshot()
		t.Errorf("B still has %d inbound SAs after the linger", len(in))
	}
}

// TestLingerDefault: with the daemon's own linger, a rekeyed child's old
// inbound SA stays as long as strongSwan's delete_rekeyed_delay (5 s),
// for what a stalled peer sent on it late; a child deleted without a
// replacement keeps its inbound SA at most deletedLinger (2 s).
func TestLingerDefault(t *testing.T) {
	a, b := pairUp(t, sideOpts{start: "start"}, sideOpts{})
	a.net.waitFor(t, "the first child", func() bool { return matched(a.node, b.node, 1) })
	if err := b.m.do(func() { b.m.linger = DefaultLinger }); err != nil {
		t.Fatal(err)
	}
	oldIn, _ := b.node.snapshot()
	if err := a.m.Rekey(Target{Child: "net"}); err != nil {
		t.Fatal(err)
	}
	a.net.waitFor(t, "B's new outbound SA", func() bool { _, out := b.node.snapshot(); _, ok := out[0x1002]; return ok && len(out) == 1 })
	inboundAfter := func(what string, d time.Duration, want int) map[uint32]sa.Config {
		t.Helper()
		b.net.advance(t, d)
		in, _ := b.node.snapshot()
		if len(in) != want {
			t.Errorf("%s: B has %d inbound SAs, want %d", what, len(in), want)
		}
		return in
	}
	in := inboundAfter("4.5 s after the rekey", 4500*time.Millisecond, 2)
	for spi := range oldIn {
		if _, ok := in[spi]; !ok {
			t.Errorf("4.5 s after the rekey B removed the old inbound SA %08x, want it kept 5 s", spi)
		}
	}
	inboundAfter("5.5 s after the rekey", time.Second, 1)

	if err := a.m.Terminate(Target{Child: "net"}); err != nil {
		t.Fatal(err)
	}
	a.net.waitFor(t, "B's outbound SA gone", func() bool { _, out := b.node.snapshot(); return len(out) == 0 })
	inboundAfter("1.5 s after the child's delete", 1500*time.Millisecond, 1)
	inboundAfter("2.5 s after the child's delete", time.Second, 0)
}

// TestRedundantChild: the redundant child of simultaneous rekeys (the
// engine says so, InboundOnly, and then deletes it) gets its inbound SA
// and no outbound SA: nothing is sent on it.
func TestRedundantChild(t *testing.T) {
	cfg := parseSide(t, "127.0.0.1", "127.0.0.2", "a.test", "b.test", "10.1.0", "10.2.0", sideOpts{})
	f := newFakeNode(0)
	m, err := New(Config{IKE: &cfg.IKEConfig, Node: f, RawESP: true, Listen: []netip.Addr{netip.MustParseAddr("127.0.0.1")}, Transport: newMemNet()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	now := time.Now()
	c := m.conns["peer"]
	local, remote := netip.MustParseAddrPort("127.0.0.1:500"), netip.MustParseAddrPort("127.0.0.2:500")
	s, _, err := ike.Initiate(c.ec, local, remote, now)
	if err != nil {
		t.Fatal(err)
	}
	x := m.add(s, c, now)
	gcm, _ := proposal.Lookup("aes128gcm16")
	child := func(in, out uint32) *ike.Child {
		key := func(b byte) keys.ESPKeys { return keys.ESPKeys{Enc: bytes.Repeat([]byte{b}, 20)} }
		ts := func(from, to string) []message.Selector {
			return []message.Selector{{EndPort: 65535, Start: netip.MustParseAddr(from), End: netip.MustParseAddr(to)}}
		}
		return &ike.Child{Suite: proposal.Suite{Encr: gcm}, InSPI: in, OutSPI: out, In: key(byte(in)), Out: key(byte(out)), Local: local, Remote: remote,
			LocalTS: ts("10.1.0.0", "10.1.0.255"), RemoteTS: ts("10.2.0.0", "10.2.0.255")}
	}
	m.childUp(x, child(0x100, 0x200), false, now)
	redundant := child(0x101, 0x201)
	redundant.Redundant = true
	m.childUp(x, redundant, true, now) // as the engine reports a redundant child
	if ev := f.events(); !slices.Equal(ev, []change{{op: opInstall, spi: 0x100, out: 0x200}, {op: opAdd, dir: sa.DirIn, spi: 0x101}}) {
		t.Errorf("changes %v: want the first pair, then only the redundant child's inbound SA", ev)
	}
}

func (f *fakeNode) SetPeer(owner node.Owner, id node.StateID, peer netip.AddrPort) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.states[id]
	if !ok || c.Encap == nil {
		return fmt.Errorf("%s: %w", id, sa.ErrNotFound)
	}
	f.moved = append(f.moved, moved{id.SPI, peer})
	return nil
}

// TestNATTLocalAddress: IKE from an underlay bound to one address (which
// then reports no local address) is taken as arriving at that address.
func TestNATTLocalAddress(t *testing.T) {
	cfg := parseSide(t, "127.0.0.1", "127.0.0.2", "a.test", "b.test", "10.1.0", "10.2.0", sideOpts{})
	m, err := New(Config{IKE: &cfg.IKEConfig, Node: newFakeNode(0), RawESP: true, NATTAddr: netip.MustParseAddr("192.0.2.1"),
		Listen: []netip.Addr{netip.MustParseAddr("127.0.0.1")}, Transport: newMemNet()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.DeliverNonESP(make([]byte, 32), netip.MustParseAddrPort("192.0.2.9:4500"), netip.Addr{})
	m.DeliverNonESP(make([]byte, 32), netip.MustParseAddrPort("192.0.2.9:4500"), netip.MustParseAddr("192.0.2.3"))
	for _, want := range []string{"192.0.2.1:4500", "192.0.2.3:4500"} {
		if p := <-m.inbox; p.local.String() != want {
			t.Errorf("local %s, want %s", p.local, want)
		}
	}
	// The non-ESP marker with no IKE message after it is counted.
	m.DeliverNonESP([]byte{0, 0, 0, 0}, netip.MustParseAddrPort("192.0.2.9:4500"), netip.Addr{})
	if got := m.Counters().Malformed; got != 1 {
		t.Errorf("an empty IKE message on port 4500: malformed %d, want 1", got)
	}
}

// loopNATT stands in for the underlay's ESP-in-UDP socket of one IKE daemon
// at addr: what it sends reaches the peer's IKE daemon's DeliverNonESP, as from
// addr:4500, marker included; keepalives are counted.
type loopNATT struct {
	addr netip.Addr
	// mem, when set, counts what it delivers (testNet.settle).
	mem        *memNet
	peer       atomic.Pointer[Daemon]
	keepalives atomic.Int64
	// mapped, when set, is the port a NAT in front of this side maps
	// 4500 to: what it sends arrives from there (TestFollowPeer).
	mapped atomic.Uint32
	// anyPort: the peer's port may be other than 4500 (it is behind
	// such a NAT).
	anyPort bool
}

func (n *loopNATT) WriteNonESP(b []byte, to netip.AddrPort, local netip.Addr) error {
	if (to.Port() != ike.NATTPort && !n.anyPort) || local != n.addr {
		return fmt.Errorf("IKE to %v from %v, want port 4500 from %v", to, local, n.addr)
	}
	from := uint16(ike.NATTPort)
	if m := n.mapped.Load(); m != 0 {
		from = uint16(m)
	}
	if p := n.peer.Load(); p != nil {
		p.DeliverNonESP(append([]byte{0, 0, 0, 0}, b...), netip.AddrPortFrom(n.addr, from), to.Addr())
		if n.mem != nil {
			n.mem.delivered.Add(1)
		}
	}
	return nil
}

func (n *loopNATT) WriteKeepalive(to netip.AddrPort, local netip.Addr) error {
	n.keepalives.Add(1)
	return nil
}

// TestNATT: without raw ESP, IKE moves to port 4500 after IKE_SA_INIT
// (forced NAT detection), on the underlay's socket with the non-ESP
// marker; the children are UDP-encapsulated between the 4500s, a rekey
// runs there, and NAT keepalives go out.
func TestNATT(t *testing.T) {
	na, nb := &loopNATT{addr: netip.MustParseAddr("127.0.0.1")}, &loopNATT{addr: netip.MustParseAddr("127.0.0.2")}
	cfgB := parseSide(t, "127.0.0.2", "127.0.0.1", "b.test", "a.test", "10.2.0", "10.1.0", sideOpts{})
	n := newTestNet()
	na.mem, nb.mem = n.mem, n.mem
	b := startDaemon(t, n, Config{IKE: &cfgB.IKEConfig, NATT: nb, Listen: []netip.Addr{nb.addr}}, 0x2000)
	cfgA := parseSide(t, "127.0.0.1", "127.0.0.2", "a.test", "b.test", "10.1.0", "10.2.0", sideOpts{start: "start"})
	a := startDaemon(t, n, Config{IKE: &cfgA.IKEConfig, NATT: na, PeerPort: b.m.Port(), Listen: []netip.Addr{na.addr}}, 0x1000)
	na.peer.Store(b.m)
	nb.peer.Store(a.m)
	for _, e := range []*endpoint{a, b} {
		if err := e.m.do(func() { e.m.keepalive = 100 * time.Millisecond }); err != nil {
			t.Fatal(err)
		}
	}
	a.net.waitFor(t, "the child", func() bool { return matched(a.node, b.node, 1) })
	_, out := a.node.snapshot()
	for _, c := range out {
		if c.Encap == nil || c.Encap.SrcPort != 4500 || c.Encap.DstPort != 4500 {
			t.Errorf("A's outbound SA encap %+v, want UDP 4500 to 4500", c.Encap)
		}
	}
	if l := list(t, a)[0]; !l.NAT || l.Remote.Port() != 4500 || l.Local.Port() != 4500 {
		t.Errorf("A's IKE SA: %+v, want NAT and port 4500", l)
	}
	first := list(t, a)[0]
	if err := b.m.Rekey(Target{Child: "net"}); err != nil {
		t.Fatal(err)
	}
	a.net.waitFor(t, "a rekey on port 4500 and keepalives", func() bool {
		l, _ := a.m.List()
		return len(l) == 1 && len(l[0].Children) == 1 && l[0].Children[0].SPIIn != first.Children[0].SPIIn &&
			matched(a.node, b.node, 1) && na.keepalives.Load() >= 2 && nb.keepalives.Load() >= 2
	})
}

// TestFollowPeer: when A's NAT maps it to a new port, B's IKE SA moves
// there at A's next authenticated message (a child rekey here), and B's
// outbound ESP SA follows it (node SetPeer), once; ESP SAs of the rekeyed
// child are made for the new port directly.
func TestFollowPeer(t *testing.T) {
	na, nb := &loopNATT{addr: netip.MustParseAddr("127.0.0.1")}, &loopNATT{addr: netip.MustParseAddr("127.0.0.2"), anyPort: true}
	cfgB := parseSide(t, "127.0.0.2", "127.0.0.1", "b.test", "a.test", "10.2.0", "10.1.0", sideOpts{})
	n := newTestNet()
	na.mem, nb.mem = n.mem, n.mem
	b := startDaemon(t, n, Config{IKE: &cfgB.IKEConfig, NATT: nb, Listen: []netip.Addr{nb.addr}}, 0x2000)
	cfgA := parseSide(t, "127.0.0.1", "127.0.0.2", "a.test", "b.test", "10.1.0", "10.2.0", sideOpts{start: "start"})
	a := startDaemon(t, n, Config{IKE: &cfgA.IKEConfig, NATT: na, PeerPort: b.m.Port(), Listen: []netip.Addr{na.addr}}, 0x1000)
	na.peer.Store(b.m)
	nb.peer.Store(a.m)
	a.net.waitFor(t, "the child", func() bool { return matched(a.node, b.node, 1) })
	_, out := b.node.snapshot()
	var spiOut uint32
	for spi := range out {
		spiOut = spi
	}

	na.mapped.Store(20001)
	if err := a.m.Rekey(Target{Child: "net"}); err != nil {
		t.Fatal(err)
	}
	movedTo := netip.MustParseAddrPort("127.0.0.1:20001")
	a.net.waitFor(t, "B's IKE SA at A's new port", func() bool {
		l, _ := b.m.List()
		return len(l) == 1 && l[0].Remote == movedTo && len(l[0].Children) == 1 && l[0].Children[0].SPIOut != fmt.Sprintf("%08x", spiOut) && matched(a.node, b.node, 1)
	})
	b.node.mu.Lock()
	got := slices.Clone(b.node.moved)
	b.node.mu.Unlock()
	if want := []moved{{spiOut, movedTo}}; !slices.Equal(got, want) {
		t.Errorf("B moved outbound SAs %v, want %v (the child's, once)", got, want)
	}
	_, out = b.node.snapshot()
	for spi, c := range out {
		if c.Dst != movedTo.Addr() || c.Encap == nil || c.Encap.DstPort != movedTo.Port() {
			t.Errorf("B's rekeyed outbound SA %08x goes to %v port %+v, want %v", spi, c.Dst, c.Encap, movedTo)
		}
	}
}

// spiOf parses an SPI as ike list writes it (0x1001).
func spiOf(t *testing.T, s string) uint32 {
	t.Helper()
	v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 32)
	if err != nil {
		t.Fatalf("SPI %q: %v", s, err)
	}
	return uint32(v)
}
