package stack

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/xfrmif"
)

// TestCloseLeavesNothing: after Close, with connections and listeners
// still open and traffic just sent, the goroutine count returns to what
// it was before New, and the underlay ports can be bound again.
func TestCloseLeavesNothing(t *testing.T) {
	before := runtime.NumGoroutine()
	// A sub-test, so that the pair's Cleanup (Close) runs before the
	// count is taken.
	var ports [2]netip.AddrPort
	t.Run("traffic", func(t *testing.T) {
		p := startPair(t, pairSpec{suite: suites[0], mode: sa.ModeTunnel, outer: lo4, inner: doc4})
		exchangeTCP(t, p, 1<<20, 60*time.Second)
		// Left open on purpose: Close must end them.
		ln, err := p.nets[1].ListenTCP(&net.TCPAddr{Port: 7})
		if err != nil {
			t.Fatal(err)
		}
		_ = ln
		if _, err := p.nets[0].DialUDP(nil, &net.UDPAddr{IP: doc4[1].AsSlice(), Port: 9}); err != nil {
			t.Fatal(err)
		}
		for i, n := range p.nets {
			ports[i] = n.UnderlayAddr()
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if now := runtime.NumGoroutine(); now > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines 10 s after Close, %d before New:\n%s", now, before, buf[:runtime.Stack(buf, true)])
	}
	for _, ap := range ports {
		c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(ap))
		if err != nil {
			t.Fatalf("underlay %v not released: %v", ap, err)
		}
		c.Close()
	}
}

// TestNewRefusesBadConfig: each bad Config is refused with an error that
// names the field and wraps ErrInvalidConfig (and the sa or xfrmif error
// under it), and a refused New leaves no goroutine and no bound socket.
func TestNewRefusesBadConfig(t *testing.T) {
	free := freeUDPPortOn(t, lo4[0])
	good := func() Config {
		return Config{
			EphemeralKeys: true,
			Underlay:      free,
			Addresses:     []netip.Prefix{netip.MustParsePrefix("192.0.2.1/24")},
			States: []sa.Config{{
				Src: lo4[0], Dst: lo4[1], SPI: 0x1001, Dir: sa.DirOut, Mode: sa.ModeTunnel,
				AEAD:  &sa.Algorithm{Name: sa.AlgGCM, Key: make([]byte, 20)},
				Encap: &sa.Encap{SrcPort: 4500, DstPort: 4500},
			}},
		}
	}
	tests := []struct {
		name   string
		change func(*Config)
		field  string
		is     error
	}{
		{"no underlay", func(c *Config) { c.Underlay = netip.AddrPort{} }, "Underlay", ErrInvalidConfig},
		{"mapped underlay", func(c *Config) { c.Underlay = netip.MustParseAddrPort("[::ffff:127.0.0.1]:0") }, "Underlay", ErrInvalidConfig},
		{"no address", func(c *Config) { c.Addresses = nil }, "Addresses", ErrInvalidConfig},
		{"bad address", func(c *Config) { c.Addresses = append(c.Addresses, netip.Prefix{}) }, "Addresses[1]", ErrInvalidConfig},
		{"bad route", func(c *Config) { c.Routes = []netip.Prefix{{}} }, "Routes[0]", ErrInvalidConfig},
		{"mtu too small", func(c *Config) { c.MTU = 20 }, "mtu", xfrmif.ErrInvalidConfig},
		{"mtu too small for IPv6", func(c *Config) {
			c.MTU = 1000
			c.Addresses = []netip.Prefix{netip.MustParsePrefix("2001:db8::1/64")}
		}, "mtu", xfrmif.ErrInvalidConfig},
		{"state key", func(c *Config) { c.States[0].AEAD.Key = make([]byte, 7) }, "States[0]", sa.ErrInvalidConfig},
		{"state spi", func(c *Config) { c.States[0].SPI = 7 }, "States[0]", sa.ErrInvalidConfig},
		{"state if_id", func(c *Config) { c.States[0].IfID = 9 }, "States[0].IfID", ErrInvalidConfig},
		{"raw ESP state", func(c *Config) { c.States[0].Encap = nil }, "States[0].Encap", ErrInvalidConfig},
		{"duplicate state", func(c *Config) {
			dup := c.States[0]
			dup.AEAD = &sa.Algorithm{Name: sa.AlgGCM, Key: bytes.Repeat([]byte{1}, 20)}
			c.States = append(c.States, dup)
		}, "States", sa.ErrExists},
		{"key reused inbound", func(c *Config) {
			in := c.States[0]
			in.Dir, in.Src, in.Dst, in.SPI = sa.DirIn, in.Dst, in.Src, 0x2001
			c.States = append(c.States, in)
		}, "States[1].AEAD.Key: the same key as States[0].AEAD.Key", ErrInvalidConfig},
		{"AES key reused with another salt, as a cbc key", func(c *Config) {
			c.States = append(c.States, sa.Config{
				Src: lo4[1], Dst: lo4[0], SPI: 0x2001, Dir: sa.DirIn, Mode: sa.ModeTunnel,
				Enc:   &sa.Algorithm{Name: sa.AlgCBC, Key: make([]byte, 16)},
				Auth:  &sa.Algorithm{Name: sa.AlgHMACSHA2, Key: bytes.Repeat([]byte{2}, 32), Bits: 128},
				Encap: &sa.Encap{SrcPort: 4500, DstPort: 4500},
			})
		}, "States[1].Enc.Key: the same key as States[0].AEAD.Key", ErrInvalidConfig},
		{"enc key as auth key", func(c *Config) {
			c.States[0].AEAD = nil
			c.States[0].Enc = &sa.Algorithm{Name: sa.AlgCBC, Key: bytes.Repeat([]byte{3}, 32)}
			c.States[0].Auth = &sa.Algorithm{Name: sa.AlgHMACSHA2, Key: bytes.Repeat([]byte{3}, 32), Bits: 128}
		}, "States[0].Auth.Key: the same key as Enc.Key", ErrInvalidConfig},
		{"policy if_id", func(c *Config) { c.Policies = []sa.Policy{{Dir: sa.DirOut, IfID: 5, Action: sa.ActionAllow}} }, "Policies[0].IfID", ErrInvalidConfig},
		{"underlay in use", func(c *Config) { c.Underlay = busyUDPPort(t) }, "Underlay", nil},
	}
	before := runtime.NumGoroutine()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good()
			tt.change(&cfg)
			n, err := New(cfg)
			if err == nil {
				n.Close()
				t.Fatalf("New accepted it")
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Errorf("error %q does not name %s", err, tt.field)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %q does not wrap %v", err, tt.is)
			}
			t.Logf("%v", err)
		})
	}
	// The good config works, on the port the failed attempts would have
	// bound: nothing was left bound.
	n, err := New(good())
	if err != nil {
		t.Fatalf("New(good): %v", err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if now := runtime.NumGoroutine(); now > before {
		t.Fatalf("%d goroutines after the refused configs, %d before", now, before)
	}
}

// busyUDPPort returns a loopback address bound by the test until it ends.
func busyUDPPort(t *testing.T) netip.AddrPort {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.LocalAddr().(*net.UDPAddr).AddrPort()
}

// TestCloseZeroesKeys: Close empties the SAD, so every SA's keys are
// zeroed (sa/retire.go), as when the daemon stops.
func TestCloseZeroesKeys(t *testing.T) {
	p := startPair(t, pairSpec{suite: suites[0], mode: sa.ModeTunnel, outer: lo4, inner: doc4})
	exchangeTCP(t, p, 64<<10, 60*time.Second)
	states := p.nets[0].SAD().States()
	if len(states) == 0 {
		t.Fatal("no states before Close")
	}
	p.nets[0].Close()
	for _, s := range states {
		if !s.Wiped() {
			t.Errorf("SA %v: keys not zeroed after Close", s)
		}
	}
	if got := len(p.nets[0].SAD().States()); got != 0 {
		t.Errorf("%d states left after Close, want 0", got)
	}
}

// TestHardExpiredRemoved: an SA whose hard lifetime ends is removed from
// the SAD within a couple of ticks, as the daemon removes it, so a fresh
// SA with the same selectors is all that is left to seal.
func TestHardExpiredRemoved(t *testing.T) {
	p := startPair(t, pairSpec{suite: suites[0], mode: sa.ModeTunnel, outer: lo4, inner: doc4})
	n := p.nets[0]
	var out sa.Config
	for _, s := range n.SAD().States() {
		if s.Dir() == sa.DirOut {
			out = s.Config()
		}
	}
	if out.SPI == 0 {
		t.Fatal("no outbound SA")
	}
	// A second outbound SA with the same selectors, a new SPI and key, and
	// a hard add-time limit of 1 s.
	out.SPI++
	for _, a := range []*sa.Algorithm{out.AEAD, out.Enc, out.Auth} {
		if a != nil {
			a.Key[0] ^= 0xff // Config returns a copy
		}
	}
	out.Lifetime = sa.Lifetime{HardAdd: time.Second}
	if err := n.AddState(out); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		found := false
		for _, s := range n.SAD().States() {
			if s.SPI() == out.SPI && s.Dir() == sa.DirOut {
				found = true
			}
		}
		if !found {
			exchangeTCP(t, p, 64<<10, 60*time.Second) // the first SA seals again
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("SA 0x%x still in the SAD 5 s after its 1 s hard lifetime", out.SPI)
}

// TestAddStateRefusesKeyReuse: Net.AddState refuses a key that an SA of
// New or AddState had, running or deleted, of either direction, naming
// the field and the earlier SA and never the key; a fresh key is added.
func TestAddStateRefusesKeyReuse(t *testing.T) {
	outKey, inKey := bytes.Repeat([]byte{0xa1}, 20), bytes.Repeat([]byte{0xb2}, 20)
	state := func(dir sa.Dir, spi uint32, key []byte) sa.Config {
		src, dst := lo4[0], lo4[1]
		if dir == sa.DirIn {
			src, dst = dst, src
		}
		return sa.Config{Src: src, Dst: dst, SPI: spi, Dir: dir, Mode: sa.ModeTunnel,
			AEAD:  &sa.Algorithm{Name: sa.AlgGCM, Key: bytes.Clone(key)},
			Encap: &sa.Encap{SrcPort: 4500, DstPort: 4500}}
	}
	n, err := New(Config{
		Underlay:      freeUDPPortOn(t, lo4[0]),
		Addresses:     []netip.Prefix{netip.MustParsePrefix("192.0.2.1/24")},
		States:        []sa.Config{state(sa.DirOut, 0x1001, outKey), state(sa.DirIn, 0x2001, inKey)},
		EphemeralKeys: true, // keys made for this run only
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	addedKey := bytes.Repeat([]byte{0xc3}, 20)
	if err := n.AddState(state(sa.DirOut, 0x1002, addedKey)); err != nil {
		t.Fatalf("AddState with a fresh key: %v", err)
	}
	if err := n.SAD().Delete(sa.DirOut, 0x1002, lo4[1]); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		state sa.Config
		want  string
	}{
		{"New's outbound key, inbound", state(sa.DirIn, 0x2002, outKey), "AEAD.Key: the same key as spi 0x1001 dir out dst 127.0.0.2, AEAD.Key"},
		{"New's inbound key, outbound", state(sa.DirOut, 0x1003, inKey), "AEAD.Key: the same key as spi 0x2001 dir in dst 127.0.0.1, AEAD.Key"},
		{"a deleted SA's key, same SPI", state(sa.DirOut, 0x1002, addedKey), "AEAD.Key: the same key as spi 0x1002 dir out dst 127.0.0.2, AEAD.Key"},
		{"a deleted SA's key, inbound", state(sa.DirIn, 0x2003, addedKey), "AEAD.Key: the same key as spi 0x1002 dir out dst 127.0.0.2, AEAD.Key"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := n.AddState(tt.state)
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("AddState: %v, want ErrInvalidConfig and %q", err, tt.want)
			}
			for _, k := range [][]byte{outKey, inKey, addedKey} {
				if strings.Contains(strings.ToLower(err.Error()), fmt.Sprintf("%x", k[:8])) {
					t.Errorf("error holds key material: %v", err)
				}
			}
		})
	}
	if err := n.AddState(state(sa.DirIn, 0x2004, bytes.Repeat([]byte{0xd4}, 20))); err != nil {
		t.Errorf("AddState with a fresh key: %v", err)
	}
}

// freeUDPPortOn returns addr with a UDP port that was free a moment ago.
func freeUDPPortOn(t *testing.T, addr netip.Addr) netip.AddrPort {
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, 0)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).AddrPort()
}
