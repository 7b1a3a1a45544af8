package sa

import (
	"errors"
	"net/netip"
	"sync"
	"testing"
)

// TestSetPeer: an outbound ESP-in-UDP SA's packets go where SetPeer moved
// them, while its identity (Dst) stays; inbound and raw ESP SAs, and a
// peer of the other family, are refused. Readers of Peer run during the
// moves (go test -race checks that the data path may read it meanwhile).
func TestSetPeer(t *testing.T) {
	out, in := pair(t, ModeTunnel, false, false, 64, func(c *Config) {
		c.AEAD = &Algorithm{Name: "rfc4106(gcm(aes))", Key: seqKey(20, 1), Bits: 128}
		c.Encap = &Encap{SrcPort: 4500, DstPort: 4500}
	})
	if got, want := out.Peer(), netip.AddrPortFrom(outer4b, 4500); got != want {
		t.Fatalf("Peer before a move: %v, want %v", got, want)
	}
	moved := netip.MustParseAddrPort("198.51.100.9:10001")
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				if p := out.Peer(); p.Port() != 4500 && p != moved && p.Port() < 20000 {
					t.Errorf("Peer during the moves: %v", p)
					return
				}
			}
		}
	}()
	for i := range 100 {
		if err := out.SetPeer(netip.AddrPortFrom(moved.Addr(), uint16(20000+i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := out.SetPeer(moved); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	if out.Peer() != moved || out.Dst() != outer4b || out.Config().Dst != outer4b {
		t.Errorf("after SetPeer(%v): Peer %v, Dst %v, Config().Dst %v; want the new peer and the old identity", moved, out.Peer(), out.Dst(), out.Config().Dst)
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = out.Peer() }); allocs != 0 {
		t.Errorf("Peer allocates %v times", allocs)
	}

	raw, _ := pair(t, ModeTunnel, false, false, 64, func(c *Config) {
		c.AEAD = &Algorithm{Name: "rfc4106(gcm(aes))", Key: seqKey(20, 2), Bits: 128}
	})
	for name, err := range map[string]error{
		"inbound":      in.SetPeer(moved),
		"raw ESP":      raw.SetPeer(moved),
		"IPv6 peer":    out.SetPeer(netip.MustParseAddrPort("[2001:db8::9]:4500")),
		"port 0":       out.SetPeer(netip.AddrPortFrom(moved.Addr(), 0)),
		"invalid peer": out.SetPeer(netip.AddrPort{}),
	} {
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("SetPeer on %s: %v, want ErrInvalidConfig", name, err)
		}
	}
	if out.Peer() != moved {
		t.Errorf("a refused SetPeer moved the peer to %v", out.Peer())
	}
}
