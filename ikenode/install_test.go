package ikenode

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/ike/keys"
	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/ike/proposal"
	"github.com/ipsecd/ipsecd/sa"
)

// engineChildren returns how many children e's IKE SAs hold in the
// engine (what the peer is told is up), whether installed or not.
func engineChildren(t *testing.T, e *endpoint) int {
	t.Helper()
	n := 0
	if err := e.m.do(func() {
		for _, x := range e.m.sas {
			if !x.ended {
				n += len(x.sa.Children())
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestInstallFailureDeletes: a child the node refuses to install is
// deleted with the peer (an INFORMATIONAL with a Delete of its ESP SPI),
// as initiator (the child came in IKE_AUTH's response) and as responder
// (it came in the request: the delete follows our answer). Afterwards the
// peer holds no SA of it, and neither side's engine or list has a child,
// while the IKE SA stays up.
func TestInstallFailureDeletes(t *testing.T) {
	for _, failing := range []string{"initiator", "responder"} {
		t.Run(failing, func(t *testing.T) {
			a, b := pairUp(t, sideOpts{}, sideOpts{})
			bad, good := a, b
			if failing == "responder" {
				bad, good = b, a
			}
			bad.node.mu.Lock()
			bad.node.fail = errors.New("test: the node refuses the child")
			bad.node.mu.Unlock()
			if err := a.m.Initiate(Target{IKE: "peer"}); err != nil {
				t.Fatal(err)
			}
			a.net.waitFor(t, "the IKE SA", func() bool {
				la, _ := a.m.List()
				lb, _ := b.m.List()
				return len(la) == 1 && la[0].State == "ESTABLISHED" && len(lb) == 1 && lb[0].State == "ESTABLISHED"
			})
			a.net.settle(t)
			in, out := good.node.snapshot()
			eb, eg := engineChildren(t, bad), engineChildren(t, good)
			ev := good.node.events()
			if eb != 0 || eg != 0 || len(in) != 0 || len(out) != 0 || len(ev) != 3 || ev[1].op != opRemove || ev[2].op != opRemove {
				t.Fatalf("settled: the %s's engine holds %d children, the peer's %d, and the peer %d inbound and %d outbound SAs (changes %v); want none",
					failing, eb, eg, len(in), len(out), ev)
			}
			for _, e := range []*endpoint{a, b} {
				if l := list(t, e); len(l) != 1 || l[0].State != "ESTABLISHED" || len(l[0].Children) != 0 {
					t.Errorf("list: %+v; want the IKE SA up, with no child", l)
				}
			}
			if !strings.Contains(bad.log.String(), "deleting it with the peer") {
				t.Errorf("the failing side does not say it deletes the child:\n%s", bad.log.String())
			}
		})
	}
}

// TestSetAlgorithms: every ESP suite a proposal can negotiate becomes
// SAs that sa.Check accepts, with the derived keys as they come; a suite
// the table has no SA for (sha384 integrity, which a peer may offer) is
// an error, not a broken SA.
func TestSetAlgorithms(t *testing.T) {
	for _, p := range []string{"aes128gcm16", "aes256gcm16", "chacha20poly1305", "aes128-sha256", "aes256-sha256", "aes128-sha1", "aes192-sha384", "aes256-sha512"} {
		ps, err := proposal.ParseList(message.ProtoESP, []string{p})
		if err != nil {
			t.Fatal(err)
		}
		suite, err := proposal.Select(ps, proposal.Messages(ps, []byte{1, 2, 3, 4}), true)
		if err != nil {
			t.Fatal(err)
		}
		k := keys.ESPKeys{Enc: make([]byte, suite.Encr.KeySize())}
		if suite.Integ.Name != "" {
			k.Integ = make([]byte, suite.Integ.KeySize())
			k.Integ[0] = 1
		}
		c := gcmConfigBase()
		if err := setAlgorithms(&c, suite, k); err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if err := sa.Check(&c); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	// Keys of another length than sa's table gives the algorithm (48
	// bytes for hmac(sha384)) are refused, never cut or padded.
	bad := proposal.Suite{Protocol: message.ProtoESP, Encr: proposal.AES256, Integ: proposal.Integ384, ESN: proposal.ESNOff}
	c := gcmConfigBase()
	err := setAlgorithms(&c, bad, keys.ESPKeys{Enc: make([]byte, 32), Integ: make([]byte, 32)})
	if err == nil || !strings.Contains(err.Error(), `ESP integrity "sha384" cannot be installed`) {
		t.Errorf("aes256-sha384 with a 32-byte integrity key: got %v", err)
	}
	// So is what ESP has no algorithm for (a PRF as encryption).
	bad.Encr = proposal.PRF256
	if err := setAlgorithms(&c, bad, keys.ESPKeys{Enc: make([]byte, 32), Integ: make([]byte, 48)}); err == nil {
		t.Error("prfsha256 as ESP encryption: installed")
	}
}

func gcmConfigBase() sa.Config {
	c := sa.Config{SPI: 0x1001, Dir: sa.DirOut, Mode: sa.ModeTunnel, IfID: 1, Encap: &sa.Encap{SrcPort: 4500, DstPort: 4500}}
	c.Src, c.Dst = netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	return c
}
