package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/internal/syncbuf"
	"github.com/ipsecd/ipsecd/internal/tcpcheck"
	"github.com/ipsecd/ipsecd/stack/stackike"
)

// demoNetstackIKE is `ipsecd demo --netstack`, and `ipsecd demo` without
// root: the IKE demo (demoIKE) between two sidecar netstacks in this
// process (package stack/stackike), configured by the root demo's
// embedded file, their IKE and ESP in UDP on port 4500 of two loopback
// addresses. It needs no namespace, no TUN device and no privilege.
func demoNetstackIKE(size int64) error {
	la, lb, err := demoLoopbackPair()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "ipsecd-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	psk, err := demoPSK(dir)
	if err != nil {
		return err
	}
	a := &demoEndpoint{Name: "A", Local: la.String(), Peer: lb.String(), Port: ike.NATTPort, Inner: "198.51.100.1", Remote: "203.0.113.0", Net: "198.51.100.0",
		ID: "a.example.net", PeerID: "b.example.net", PSKFile: psk, StateDir: filepath.Join(dir, "a-state")}
	b := &demoEndpoint{Name: "B", Local: lb.String(), Peer: la.String(), Port: ike.NATTPort, Inner: "203.0.113.1", Remote: "198.51.100.0", Net: "203.0.113.0",
		ID: "b.example.net", PeerID: "a.example.net", PSKFile: psk, StateDir: filepath.Join(dir, "b-state")}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	fmt.Println("ipsecd demo: two sidecar endpoints in this process, each a userspace TCP/IP stack (gVisor netstack) whose only way out")
	fmt.Println("  is ESP in UDP over loopback, negotiating their keys with IKEv2 on that same port: no root, no namespace, no TUN device")
	var ends []demoIKEEnd
	for _, e := range []*demoEndpoint{a, b} {
		text, err := demoIKEConfig(e)
		if err != nil {
			return err
		}
		cfg, err := config.Parse("embedded demo config of "+e.Name, text)
		if err != nil {
			return err
		}
		end := netstackEnd{e: e, logs: &syncbuf.Buffer{}}
		log := logrus.New()
		log.SetOutput(end.logs)
		if end.n, err = stackike.New(stackike.Config{File: cfg, Log: log}); err != nil {
			return fmt.Errorf("endpoint %s: %w", e.Name, err)
		}
		defer end.n.Close()
		ends = append(ends, end)
		fmt.Printf("  %s: underlay and IKE %s, netstack %s/24, routes %s/24 into the tunnel\n", e.Name, end.n.UnderlayAddr(), e.Inner, e.Remote)
	}
	return demoIKE(ctx, ends[0], ends[1], size)
}

// demoLoopbackPair returns two loopback addresses with port 4500 free on
// both, where the sidecars' IKE must be (stackike): 127.0.0.1 and
// 127.0.0.2 if it is free there, else 127.x.y.1 and 127.x.y.2, so that the
// demo runs beside anything that holds 4500.
func demoLoopbackPair() (a, b netip.Addr, err error) {
	for i := range 20 {
		x, y := byte(0), byte(0)
		if i > 0 {
			x, y = byte(rand.N(250)+1), byte(rand.N(250)+1)
		}
		a, b = netip.AddrFrom4([4]byte{127, x, y, 1}), netip.AddrFrom4([4]byte{127, x, y, 2})
		if demoPortFree(a) && demoPortFree(b) {
			return a, b, nil
		}
	}
	return a, b, fmt.Errorf("port %d is taken on every loopback pair of 20 tried", ike.NATTPort)
}

func demoPortFree(a netip.Addr) bool {
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, ike.NATTPort)))
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// netstackEnd is an end of the IKE demo that is a sidecar in this
// process.
type netstackEnd struct {
	e    *demoEndpoint
	n    *stackike.Net
	logs *syncbuf.Buffer
}

func (s netstackEnd) endpoint() *demoEndpoint { return s.e }

func (s netstackEnd) ikeAction(cmd string, t control.IKETarget) error {
	var err error
	switch cmd {
	case "ike.initiate":
		err = s.n.Initiate(t)
	case "ike.rekey":
		err = s.n.Rekey(t)
	default:
		err = fmt.Errorf("no such action")
	}
	if err != nil {
		return fmt.Errorf("%s at %s: %w", strings.Replace(cmd, ".", " ", 1), s.e.Name, err)
	}
	return nil
}

func (s netstackEnd) ikeList() ([]control.IKESAInfo, error) { return s.n.List() }

// ikeListText is the list as `ipsecd ike list` prints it.
func (s netstackEnd) ikeListText() (string, error) {
	sas, err := s.n.List()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	writeIKESAs(&b, sas)
	return b.String(), nil
}

// counters are the netstack's xfrm_stat counters (a sidecar has no
// `ipsecd stats`, whose underlay counters are the daemon's).
func (s netstackEnd) counters() (string, []control.Counter, error) {
	var cs []control.Counter
	s.n.Counters().Each(func(name string, v uint64) { cs = append(cs, control.Counter{Name: name, Value: v}) })
	return "xfrm_stat", cs, nil
}

func (s netstackEnd) tcp(ctx context.Context, to demoIKEEnd, size int64, mid func(sent *atomic.Int64) error) (time.Duration, error) {
	peer := to.(netstackEnd) // the demo's ends are all of one kind
	ln, err := peer.n.ListenTCP(&net.TCPAddr{IP: net.ParseIP(peer.e.Inner), Port: 5201})
	if err != nil {
		return 0, fmt.Errorf("endpoint %s: listen: %w", peer.e.Name, err)
	}
	return tcpcheck.Stream(ctx, ln, func(ctx context.Context) (net.Conn, error) {
		return s.n.DialContext(ctx, "tcp", net.JoinHostPort(peer.e.Inner, "5201"))
	}, size, mid)
}

func (s netstackEnd) log() string { return s.logs.String() }
