package stack

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/sa/satest"
)

func randKey(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// suites is the shared table of cipher suites: every algorithm family
// the daemon supports.
var suites = satest.Suites

// pairSpec describes two netstacks joined over loopback UDP.
type pairSpec struct {
	suite satest.Suite
	mode  sa.Mode
	// outer are the underlay addresses of a and b; inner their netstack
	// addresses in tunnel mode (transport mode uses outer).
	outer [2]netip.Addr
	inner [2]netip.Addr
	// window is the inbound SAs' replay window (0: 64).
	window uint32
	// via, when set, gives the underlay address each side sends to
	// instead of the peer's (a relay in between): via(i, peer) for packets
	// from i. Only its port is used: the SA's outer destination stays the
	// peer's address, so the relay must listen on that address.
	via func(i int, peer netip.AddrPort) netip.AddrPort
	// newNet, when set, is used instead of New (to bind the underlay in
	// another network namespace).
	newNet func(Config) (*Net, error)
}

// testPair is two running netstacks with SAs both ways.
type testPair struct {
	nets  [2]*Net
	addrs [2]netip.Addr // the netstacks' own addresses
	in    [2]*sa.SA     // each side's inbound SA
}

// startPair brings up a and b. Their underlay ports are picked by the
// kernel (port 0), so the SAs, which name the peer's port, are added once
// both are bound, through AddState.
func startPair(t testing.TB, spec pairSpec) *testPair {
	t.Helper()
	p := &testPair{}
	for i := range p.nets {
		addr := spec.inner[i]
		if spec.mode == sa.ModeTransport {
			addr = spec.outer[i]
		}
		p.addrs[i] = addr
		newNet := spec.newNet
		if newNet == nil {
			newNet = New
		}
		n, err := newNet(Config{
			EphemeralKeys: true, // fresh keys for every test
			Underlay:      netip.AddrPortFrom(spec.outer[i], 0),
			Addresses:     []netip.Prefix{netip.PrefixFrom(addr, addr.BitLen())},
		})
		if err != nil {
			t.Fatalf("New(%d): %v", i, err)
		}
		t.Cleanup(func() {
			if err := n.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		p.nets[i] = n
	}
	window := spec.window
	if window == 0 {
		window = 64
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2 {
		j := 1 - i
		src, dst := p.nets[i].UnderlayAddr(), p.nets[j].UnderlayAddr()
		sport, dport := src.Port(), dst.Port()
		if spec.via != nil {
			dport = spec.via(i, dst).Port()
		}
		aead, enc, auth := spec.suite.Algorithms(randKey(r, spec.suite.KeyLen))
		spi := uint32(0x1000 + i) // i's outbound SA, j's inbound
		base := sa.Config{
			Src: src.Addr(), Dst: dst.Addr(), SPI: spi, Mode: spec.mode,
			AEAD: aead, Enc: enc, Auth: auth,
		}
		out := base
		out.Dir = sa.DirOut
		out.Encap = &sa.Encap{SrcPort: sport, DstPort: dport}
		in := base
		in.Dir = sa.DirIn
		in.ReplayWindow = window
		in.Encap = &sa.Encap{SrcPort: dport, DstPort: dst.Port()}
		if err := p.nets[i].AddState(out); err != nil {
			t.Fatalf("AddState out %d: %v", i, err)
		}
		if err := p.nets[j].AddState(in); err != nil {
			t.Fatalf("AddState in %d: %v", j, err)
		}
		p.in[j] = p.nets[j].SAD().LookupIn(spi, dst.Addr())
	}
	return p
}

// pattern is a deterministic byte stream, hashed as it is made.
type pattern struct {
	r *rand.ChaCha8
}

func newPattern(seed byte) *pattern {
	var s [32]byte
	s[0] = seed
	return &pattern{rand.NewChaCha8(s)}
}

// exchangeTCP sends size bytes each way over one connection from a to b
// at the same time and checks that each side received exactly what the
// other sent (SHA-256).
func exchangeTCP(t testing.TB, p *testPair, size int64, timeout time.Duration) {
	t.Helper()
	ln, err := p.nets[1].ListenTCP(&net.TCPAddr{IP: p.addrs[1].AsSlice(), Port: 5001})
	if err != nil {
		t.Fatalf("ListenTCP: %v", err)
	}
	defer ln.Close()

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	type result struct {
		sent, got [32]byte
		err       error
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	ca, err := p.nets[0].DialContext(ctx, "tcp", netip.AddrPortFrom(p.addrs[1], 5001).String())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	var cb net.Conn
	select {
	case cb = <-accepted:
	case <-ctx.Done():
	}
	if cb == nil {
		ca.Close()
		t.Fatalf("accept: none within %v", timeout)
	}
	conns := [2]net.Conn{ca, cb}
	defer ca.Close()
	defer cb.Close()
	// A deadline ends a stalled transfer with an error, not a hang.
	deadline, _ := ctx.Deadline()
	for _, c := range conns {
		c.SetDeadline(deadline)
	}

	var results [2]result
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(2)
		go func() { // send
			defer wg.Done()
			h := sha256.New()
			pat := newPattern(byte(i + 1))
			buf := make([]byte, 256<<10)
			for left := size; left > 0; {
				b := buf[:min(int64(len(buf)), left)]
				pat.r.Read(b)
				h.Write(b)
				if _, err := c.Write(b); err != nil {
					results[i].err = errors.Join(results[i].err, fmt.Errorf("side %d write: %w", i, err))
					return
				}
				left -= int64(len(b))
			}
			copy(results[i].sent[:], h.Sum(nil))
		}()
		go func() { // receive
			defer wg.Done()
			h := sha256.New()
			n, err := io.CopyN(h, c, size)
			if err != nil {
				results[1-i].err = errors.Join(results[1-i].err, fmt.Errorf("side %d read after %d of %d bytes: %w", i, n, size, err))
				return
			}
			copy(results[1-i].got[:], h.Sum(nil))
		}()
	}
	wg.Wait()
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("%v", r.err)
		}
		if r.sent != r.got {
			t.Fatalf("%d → %d: received SHA-256 %x, sent %x", i, 1-i, r.got, r.sent)
		}
	}
}

// exchangeUDP sends datagrams of several sizes up to max from a to b,
// which echoes each, so both directions are checked; a lost datagram is
// resent a few times. Sizes above the MTU (1400) are fragmented by
// netstack and reassembled by the peer.
func exchangeUDP(t testing.TB, p *testPair, max int) {
	t.Helper()
	srv, err := p.nets[1].ListenUDP(&net.UDPAddr{IP: p.addrs[1].AsSlice(), Port: 5002})
	if err != nil {
		t.Fatalf("ListenUDP: %v", err)
	}
	defer srv.Close()
	go func() {
		buf := make([]byte, 65536)
		for {
			n, from, err := srv.ReadFrom(buf)
			if err != nil {
				return
			}
			srv.WriteTo(buf[:n], from)
		}
	}()
	c, err := p.nets[0].DialUDP(nil, &net.UDPAddr{IP: p.addrs[1].AsSlice(), Port: 5002})
	if err != nil {
		t.Fatalf("DialUDP: %v", err)
	}
	defer c.Close()
	conn := c.(net.Conn)
	buf := make([]byte, 65536)
	for i, size := range []int{1, 100, 1000, 1300, 3000, 9000} {
		if size > max {
			break
		}
		msg := bytes.Repeat([]byte{byte(i + 1)}, size)
		ok := false
		for try := 0; try < 5 && !ok; try++ {
			if _, err := conn.Write(msg); err != nil {
				t.Fatalf("UDP write %d bytes: %v", size, err)
			}
			conn.SetReadDeadline(time.Now().Add(2 * time.Second))
			for {
				n, err := conn.Read(buf)
				if err != nil {
					break // resend
				}
				if bytes.Equal(buf[:n], msg) {
					ok = true
					break
				}
			}
		}
		if !ok {
			t.Fatalf("UDP: no echo of a %d-byte datagram after 5 tries", size)
		}
	}
}
