package stackike

import (
	"cmp"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/ikenode"
	"github.com/ipsecd/ipsecd/internal/looppair"
	"github.com/ipsecd/ipsecd/internal/tcpcheck"
	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/stack"
)

// settleWait bounds each wait for IKE: between two sidecars on loopback
// an IKE SA or a rekey takes milliseconds.
const settleWait = 15 * time.Second

// loopbackPair is looppair.NATT: a sidecar's IKE needs the underlay on
// port 4500.
func loopbackPair(t testing.TB) (a, b netip.Addr) { return looppair.NATT(t) }

// endpoint is one side of a test pair.
type endpoint struct {
	underlay      netip.Addr
	peer          netip.Addr
	inner, subnet string // its inner address and its /24
	remote        string // the peer's /24
	id, peerID    string
	startAction   string // the child's; "" is none
}

// pairConfig renders a sidecar's config: the underlay on port 4500, one
// interface, one connection of one child with the PSK, proposals as the
// demo's (x25519, AES-GCM-128).
func pairConfig(t testing.TB, e endpoint, psk string) *config.Config {
	t.Helper()
	text := fmt.Sprintf(`state_dir: %s
underlay: {udp: "%s:4500"}
interfaces:
  - {name: sidecar, if_id: 1, addresses: [%s/24], routes: [%s]}
connections:
  - name: t
    local_addrs: [%s]
    remote_addrs: [%s]
    proposals: [aes128gcm16-prfsha256-x25519]
    local: {auth: psk, id: %s}
    remote: {auth: psk, id: %s}
    children:
      - name: net
        if_id: 1
        local_ts: [%s]
        remote_ts: [%s]
        esp_proposals: [aes128gcm16-x25519]
        start_action: %s
secrets:
  - {ids: [%s, %s], secret: "%s"}
`, filepath.Join(t.TempDir(), "state"), e.underlay, e.inner, e.remote, e.underlay, e.peer, e.id, e.peerID, e.subnet, e.remote, cmp.Or(e.startAction, "none"), e.id, e.peerID, psk)
	cfg, err := config.Parse("test config of "+e.id, []byte(text))
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	return cfg
}

// newPair brings up two sidecars, A (198.51.100.1) and B (203.0.113.1),
// that share a fresh PSK; A's child has start_action startA ("" for none,
// A's connection not yet initiated).
func newPair(t *testing.T, startA string) (a, b *Net) {
	t.Helper()
	la, lb := loopbackPair(t)
	k := make([]byte, 32)
	crand.Read(k)
	psk := "0x" + hex.EncodeToString(k)
	ea := endpoint{underlay: la, peer: lb, inner: "198.51.100.1", subnet: "198.51.100.0/24", remote: "203.0.113.0/24", id: "a.test", peerID: "b.test", startAction: startA}
	eb := endpoint{underlay: lb, peer: la, inner: "203.0.113.1", subnet: "203.0.113.0/24", remote: "198.51.100.0/24", id: "b.test", peerID: "a.test"}
	var err error
	if b, err = New(Config{File: pairConfig(t, eb, psk)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if a, err = New(Config{File: pairConfig(t, ea, psk)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a, b
}

// settled returns n's one established IKE SA if it has exactly one
// installed child and no other SA (a rekeyed one lingers a moment).
func settled(n *Net) (control.IKESAInfo, bool) {
	sas, err := n.List()
	if err != nil {
		return control.IKESAInfo{}, false
	}
	var up []control.IKESAInfo
	for _, s := range sas {
		if s.State != "REKEYED" {
			up = append(up, s)
		}
	}
	if len(up) != 1 || up[0].State != "ESTABLISHED" || len(up[0].Children) != 1 || up[0].Children[0].State != "INSTALLED" {
		return control.IKESAInfo{}, false
	}
	return up[0], true
}

// waitSettled waits until both ends are settled and done(A's, B's)
// holds, and returns A's view.
func waitSettled(a, b *Net, what string, done func(sa, sb control.IKESAInfo) bool) (control.IKESAInfo, error) {
	deadline := time.Now().Add(settleWait)
	for time.Now().Before(deadline) {
		sa, okA := settled(a)
		sb, okB := settled(b)
		if okA && okB && done(sa, sb) {
			return sa, nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	la, _ := a.List()
	lb, _ := b.List()
	return control.IKESAInfo{}, fmt.Errorf("%s: not settled within %v\nA: %+v\nB: %+v", what, settleWait, la, lb)
}

// mustSettle is waitSettled for the test's goroutine.
func mustSettle(t *testing.T, a, b *Net, what string) control.IKESAInfo {
	t.Helper()
	s, err := waitSettled(a, b, what, anySAs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func anySAs(_, _ control.IKESAInfo) bool { return true }

// stream is tcpcheck.Stream of size bytes over ln from dial, with mid
// (nil for none) run half-way through.
func stream(ln net.Listener, dial func(context.Context) (net.Conn, error), size int64, mid func() error) error {
	var m func(*atomic.Int64) error
	if mid != nil {
		m = func(*atomic.Int64) error { return mid() }
	}
	_, err := tcpcheck.Stream(context.Background(), ln, dial, size, m)
	return err
}

// netstackStream is stream between two netstacks, to port 5201 of toAddr.
func netstackStream(from, to *stack.Net, toAddr string, size int64, mid func() error) error {
	ln, err := to.ListenTCP(&net.TCPAddr{IP: net.ParseIP(toAddr), Port: 5201})
	if err != nil {
		return err
	}
	return stream(ln, func(ctx context.Context) (net.Conn, error) {
		return from.DialContext(ctx, "tcp", net.JoinHostPort(toAddr, "5201"))
	}, size, mid)
}

// TestPair: two sidecars in one process negotiate an IKE SA and a child
// over loopback UDP (PSK, X25519, AES-GCM-128), carry a checksummed TCP
// stream each way, the child rekeyed from A in the middle of the first
// and the IKE SA from B in the middle of the second, with new SPIs
// after each and not one ESP packet dropped at either end.
func TestPair(t *testing.T) {
	a, b := newPair(t, "")
	if err := a.Initiate(ikenode.Target{IKE: "t"}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	before := mustSettle(t, a, b, "IKE SA up")
	t.Logf("IKE SA and child up in %v: IKE %s_i %s_r, child %s_i %s_o", time.Since(start).Round(time.Millisecond),
		before.SPIInitiator, before.SPIResponder, before.Children[0].SPIIn, before.Children[0].SPIOut)

	const size = 16 << 20
	rekeyChild := func() error {
		if err := a.Rekey(ikenode.Target{Child: "net"}); err != nil {
			return err
		}
		_, err := waitSettled(a, b, "child rekey", func(sa, _ control.IKESAInfo) bool {
			return sa.Children[0].SPIIn != before.Children[0].SPIIn && sa.Children[0].SPIOut != before.Children[0].SPIOut
		})
		return err
	}
	if err := netstackStream(a.Net, b.Net, "203.0.113.1", size, rekeyChild); err != nil {
		t.Fatalf("TCP A → B across a child rekey: %v", err)
	}
	mid := mustSettle(t, a, b, "after the child rekey")
	rekeyIKE := func() error {
		if err := b.Rekey(ikenode.Target{IKE: "t"}); err != nil {
			return err
		}
		_, err := waitSettled(a, b, "IKE rekey", func(sa, _ control.IKESAInfo) bool {
			return sa.SPIInitiator != mid.SPIInitiator && sa.SPIResponder != mid.SPIResponder
		})
		return err
	}
	if err := netstackStream(b.Net, a.Net, "198.51.100.1", size, rekeyIKE); err != nil {
		t.Fatalf("TCP B → A across an IKE rekey: %v", err)
	}
	after := mustSettle(t, a, b, "after the IKE rekey")
	t.Logf("after: IKE %s_i %s_r, child %s_i %s_o", after.SPIInitiator, after.SPIResponder, after.Children[0].SPIIn, after.Children[0].SPIOut)
	if after.Children[0].SPIIn == before.Children[0].SPIIn {
		t.Errorf("child SPI %s before and after the rekey", after.Children[0].SPIIn)
	}
	for name, n := range map[string]*Net{"A": a, "B": b} {
		n.Counters().Each(func(counter string, v uint64) {
			if v != 0 && strings.HasPrefix(counter, "Xfrm") {
				t.Errorf("%s: %s %d, want 0: a packet was dropped", name, counter, v)
			}
		})
		var packets uint64
		for _, s := range n.SAD().States() {
			packets += s.Stats().Packets
		}
		if packets == 0 {
			t.Errorf("%s: the SAs counted no packets: the streams did not cross ESP", name)
		}
	}
}

// TestTrap: with start_action trap, the first packet the netstack routes
// into the tunnel starts IKE (the node's acquire), and the TCP connection
// it belongs to is made once the child is up (SYN retransmitted).
func TestTrap(t *testing.T) {
	a, b := newPair(t, "trap")
	if sas, _ := a.List(); len(sas) != 0 {
		t.Fatalf("IKE SAs before any packet: %+v", sas)
	}
	start := time.Now()
	if err := netstackStream(a.Net, b.Net, "203.0.113.1", 1<<20, nil); err != nil {
		t.Fatalf("TCP A → B through a trap: %v", err)
	}
	mustSettle(t, a, b, "IKE SA up")
	t.Logf("first packet to the stream's end through a trapped child: %v", time.Since(start).Round(time.Millisecond))
	if v := a.Counters().Get(sa.XfrmOutNoStates); v == 0 {
		t.Errorf("XfrmOutNoStates 0: the first packet should have found the trap policy with no SA yet")
	}
}

// TestConfigErrors: what a sidecar cannot run is refused before anything
// is bound, naming the field.
func TestConfigErrors(t *testing.T) {
	la, lb := loopbackPair(t)
	e := endpoint{underlay: la, peer: lb, inner: "198.51.100.1", subnet: "198.51.100.0/24", remote: "203.0.113.0/24", id: "a.test", peerID: "b.test"}
	port := pairConfig(t, e, "0x00112233445566778899aabbccddeeff")
	port.Underlay.UDP = netip.AddrPortFrom(la, 4501)
	static := pairConfig(t, e, "0x00112233445566778899aabbccddeeff")
	static.Connections = nil
	for _, tt := range []struct {
		name string
		cfg  *config.Config
		want string
	}{
		{"nil", nil, "no config file"},
		{"no connections", static, "connections: none"},
		{"underlay port", port, "underlay.udp: port 4501"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n, err := New(Config{File: tt.cfg})
			if err == nil {
				n.Close()
				t.Fatal("New succeeded")
			}
			if !errors.Is(err, stack.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want stack.ErrInvalidConfig naming %q", err, tt.want)
			}
		})
	}
}
