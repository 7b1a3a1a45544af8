package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/internal/tcpcheck"
	"github.com/ipsecd/ipsecd/stack"
	"github.com/ipsecd/ipsecd/stack/stackfile"
)

// demoNetstack is `ipsecd demo` without root (or with --netstack): the
// same two endpoints, configured by the same embedded default file, as two
// netstacks (package stack, the sidecar) in this process, their ESP in UDP
// over loopback between 127.0.0.1 and 127.0.0.2. It needs no namespace, no
// TUN device and no privilege; the TCP streams, the checksums and the
// counters are those of the root demo.
func demoNetstack(size int64) error {
	port, err := demoFreePort()
	if err != nil {
		return err
	}
	// The keys are fresh, so their sequence numbers need no keeping
	// across runs: a temporary state_dir, gone with the demo.
	dir, err := os.MkdirTemp("", "ipsecd-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	keyAB, keyBA := demoKey(), demoKey()
	a := &demoEndpoint{Name: "A", Local: "127.0.0.1", Peer: "127.0.0.2", Port: port, StateDir: filepath.Join(dir, "a-state"),
		Inner: "198.51.100.1", Remote: "203.0.113.0", SPIOut: "0x1001", SPIIn: "0x2001", KeyOut: keyAB, KeyIn: keyBA}
	b := &demoEndpoint{Name: "B", Local: "127.0.0.2", Peer: "127.0.0.1", Port: port, StateDir: filepath.Join(dir, "b-state"),
		Inner: "203.0.113.1", Remote: "198.51.100.0", SPIOut: "0x2001", SPIIn: "0x1001", KeyOut: keyBA, KeyIn: keyAB}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	fmt.Println("ipsecd demo: two sidecar endpoints in this process, each a userspace TCP/IP stack (gVisor netstack)")
	fmt.Println("  whose only way out is ESP in UDP over loopback: no root, no namespace, no TUN device")
	nets := map[*demoEndpoint]*stack.Net{}
	for _, e := range []*demoEndpoint{a, b} {
		text, err := demoConfig(e)
		if err != nil {
			return err
		}
		cfg, err := config.Parse("embedded demo config of "+e.Name, text)
		if err != nil {
			return err
		}
		n, err := stackfile.New(cfg)
		if err != nil {
			return fmt.Errorf("endpoint %s: %w", e.Name, err)
		}
		defer n.Close()
		nets[e] = n
		fmt.Printf("  %s: underlay %s, netstack %s/24, routes %s/24 into the tunnel\n", e.Name, n.UnderlayAddr(), e.Inner, e.Remote)
	}
	fmt.Println("  suite rfc4106(gcm(aes)) 128-bit, tunnel mode, ESP in UDP, ESN, replay window 1024")
	fmt.Println()

	for _, dir := range [][2]*demoEndpoint{{a, b}, {b, a}} {
		if err := ctx.Err(); err != nil {
			return err
		}
		from, to := dir[0], dir[1]
		fmt.Printf("TCP %s → %s: sending %d MiB ...\n", from.Name, to.Name, size>>20)
		addr := net.JoinHostPort(to.Inner, "5201")
		ln, err := nets[to].ListenTCP(&net.TCPAddr{IP: net.ParseIP(to.Inner), Port: 5201})
		if err != nil {
			return fmt.Errorf("endpoint %s: listen on %s: %w", to.Name, addr, err)
		}
		took, err := tcpcheck.Stream(ctx, ln, func(ctx context.Context) (net.Conn, error) {
			return nets[from].DialContext(ctx, "tcp", addr)
		}, size, nil)
		if err != nil {
			return fmt.Errorf("TCP %s → %s: %w", from.Name, to.Name, err)
		}
		demoPrintTransfer(from, to, size, took)
	}
	fmt.Println()
	for _, e := range []*demoEndpoint{a, b} {
		demoNetReport(e.Name, nets[e])
	}
	return nil
}

// demoNetReport prints n's SAs and its xfrm_stat counters that are not
// zero, as demoReport does for a daemon.
func demoNetReport(name string, n *stack.Net) {
	fmt.Printf("endpoint %s (SAs, as ipsecd state list shows them):\n", name)
	for _, s := range n.SAD().States() {
		c, st := s.Config(), s.Stats()
		fmt.Printf("  %-3s spi %#x %s → %s  %d packets, %d bytes, replay %d, integrity-failed %d\n",
			c.Dir, c.SPI, c.Src, c.Dst, st.Packets, st.Bytes, st.Replay, st.IntegrityFailed)
	}
	st := n.Interface().Stats()
	fmt.Printf("endpoint %s (interface %s):\n", name, n.Interface().Name())
	fmt.Printf("  rx %d packets, %d bytes, %d errors, %d drops; tx %d packets, %d bytes, %d errors, %d drops\n",
		st.RxPackets, st.RxBytes, st.RxErrors, st.RxDrops, st.TxPackets, st.TxBytes, st.TxErrors, st.TxDrops)
	fmt.Printf("endpoint %s (xfrm_stat, non-zero):\n", name)
	var lines []string
	n.Counters().Each(func(counter string, v uint64) {
		if v != 0 {
			lines = append(lines, fmt.Sprintf("  %s\t%d\n", counter, v))
		}
	})
	if len(lines) == 0 {
		lines = append(lines, "  (all zero)\n")
	}
	fmt.Print(strings.Join(lines, ""))
}

// demoFreePort returns a UDP port that is free on both 127.0.0.1 and
// 127.0.0.2, so that the demo runs beside anything that holds 4500.
func demoFreePort() (int, error) {
	for range 20 {
		a, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
		if err != nil {
			return 0, fmt.Errorf("loopback UDP: %w", err)
		}
		port := a.LocalAddr().(*net.UDPAddr).Port
		b, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2), Port: port})
		a.Close()
		if err == nil {
			b.Close()
			return port, nil
		}
	}
	return 0, errors.New("no UDP port free on both 127.0.0.1 and 127.0.0.2 in 20 tries")
}
