//go:build linux

package integration

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/internal/charontest"
	"github.com/ipsecd/ipsecd/internal/hscost"
	vnetns "github.com/vishvananda/netns"
)

// handshakesEnv, when set to a count, makes TestIKEHandshakeCost run that
// many handshakes against each responder (it is a measurement, not a CI
// check, and skips otherwise).
const handshakesEnv = "IPSECD_IKE_HANDSHAKES"

// handshakeRoundsEnv is how many rounds TestIKEHandshakeCostPQ takes
// (1 unless set), and handshakeOutEnv a file it appends each sample to
// as a JSON line (hscost.Append): go run ./bench -handshakes N sets both
// and writes the medians into docs/benchmark.md.
const (
	handshakeRoundsEnv = "IPSECD_IKE_HANDSHAKE_ROUNDS"
	handshakeOutEnv    = "IPSECD_IKE_HANDSHAKE_OUT"
)

// cpuTime is the user and system time process pid has used.
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	d, err := hscost.CPUTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestIKEHandshakeCost measures what one IKE SA setup (IKE_SA_INIT and
// IKE_AUTH with its child, PSK) costs the responder, ipsecd against
// charon, same machine, same proposals: the engine initiates from the
// other namespace, one handshake at a time, and the responder's CPU time
// comes from /proc/PID/stat. Run with IPSECD_IKE_HANDSHAKES=N.
func TestIKEHandshakeCost(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv(handshakesEnv))
	if n <= 0 {
		t.Skipf("a measurement: set %s=N to run N handshakes against each responder", handshakesEnv)
	}
	for _, prop := range []struct{ ike, esp string }{
		{"aes256-sha256-x25519", "aes128gcm16"},
		{"aes256gcm16-prfsha384-ecp384", "chacha20poly1305"},
		{"aes128-sha256-modp2048", "aes256-sha256"},
	} {
		for _, responder := range []string{"ipsecd", "charon"} {
			t.Run(prop.ike+"/"+responder, func(t *testing.T) {
				charontest.Require(t)
				handshakeCost(t, n, prop.ike, prop.esp, responder, charontest.StartQuiet)
			})
		}
	}
}

// TestIKEHandshakeCostPQ is TestIKEHandshakeCost for post-quantum IKE
// SAs against strongSwan 6.1 (the sid chroot's, OpenSSL 3.6's ML-KEM):
// x25519 alone, x25519 with ML-KEM-768 as an additional key exchange
// (one IKE_INTERMEDIATE, fragmented), and ML-KEM-768 alone. Run with
// IPSECD_IKE_HANDSHAKES=N (and IPSECD_IKE_HANDSHAKE_ROUNDS=R), or as go
// run ./bench -handshakes N.
func TestIKEHandshakeCostPQ(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv(handshakesEnv))
	if n <= 0 {
		t.Skipf("a measurement: set %s=N to run N handshakes against each responder", handshakesEnv)
	}
	rounds, _ := strconv.Atoi(os.Getenv(handshakeRoundsEnv))
	rounds = max(rounds, 1)
	out := os.Getenv(handshakeOutEnv)
	// Interleaved: each round measures every proposal against both
	// responders, so a change in the machine's load touches them alike.
	for round := 1; round <= rounds; round++ {
		for _, ike := range []string{"aes256-sha256-x25519", "aes256-sha256-x25519-ke1_mlkem768", "aes256-sha256-mlkem768"} {
			for _, responder := range []string{"ipsecd", "charon"} {
				t.Run(fmt.Sprintf("%s/%s/%d", ike, responder, round), func(t *testing.T) {
					charontest.RequireSid(t)
					s := handshakeCost(t, n, ike, "aes128gcm16", responder, charontest.StartSidQuiet)
					if out == "" {
						return
					}
					if err := hscost.Append(out, s); err != nil {
						t.Fatal(err)
					}
				})
			}
		}
	}
}

// handshakeCost runs n handshakes of the engine against responder
// ("ipsecd", or "charon" as start starts it), logs the responder's CPU
// per IKE SA and the handshake times and returns them.
func handshakeCost(t *testing.T, n int, ikeProp, espProp, responder string, start func(testing.TB, string, string) *charontest.Charon) hscost.Sample {
	spec := ikeSpec{ike: ikeProp, esp: espProp, noEncap: true}
	spec.fill()
	p := newPair(t)
	var pid int
	engineNS, local, remote := p.b, underlayB4, underlayA4
	if responder == "ipsecd" {
		cfg := strings.Replace(spec.ipsecdConfig(""), "level: debug", "level: info", 1)
		pid = startDaemon(t, p.a, cfg).pid()
	} else {
		p.b.mustRun(t, "ip", "addr", "add", innerB4+"/32", "dev", "lo")
		p.b.mustRun(t, "ip", "route", "add", "default", "via", underlayA4)
		ch := start(t, p.b.name, "")
		ch.Load(spec.charonConn().String())
		pid = ch.Pid
		engineNS, local, remote = p.a, underlayA4, underlayB4
	}
	cfg := engineConfig(t, ikeProp, espProp, responder == "charon")
	la, ra := netip.MustParseAddrPort(local+":500"), netip.MustParseAddrPort(remote+":500")
	c := listenUDPIn(t, engineNS, la)
	c4500 := listenUDPIn(t, engineNS, netip.AddrPortFrom(la.Addr(), 4500))
	s, err := hscost.Measure(responder, ikeProp+"/"+espProp, n, pid, func() (time.Duration, error) {
		return engineHandshake(c, c4500, cfg, la, ra)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(s)
	return s
}

// listenUDPIn opens a UDP socket on addr in namespace ns, closed when the
// test ends. The thread that opens it goes back to its namespace before
// it is released: a thread left in ns (the main thread cannot end) would
// put the test process among the namespace's processes, which its
// clean-up kills.
func listenUDPIn(t *testing.T, ns *netns, addr netip.AddrPort) *net.UDPConn {
	t.Helper()
	type result struct {
		c   *net.UDPConn
		err error
	}
	rc := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := vnetns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			rc <- result{nil, err}
			return
		}
		defer orig.Close()
		target, err := vnetns.GetFromName(ns.name)
		if err != nil {
			runtime.UnlockOSThread()
			rc <- result{nil, err}
			return
		}
		defer target.Close()
		if err := vnetns.Set(target); err != nil {
			runtime.UnlockOSThread()
			rc <- result{nil, err}
			return
		}
		c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr))
		if vnetns.Set(orig) == nil {
			runtime.UnlockOSThread() // back home; otherwise the thread ends locked
		}
		rc <- result{c, err}
	}()
	r := <-rc
	if r.err != nil {
		t.Fatalf("listening on %v in %s: %v", addr, ns.name, r.err)
	}
	t.Cleanup(func() { r.c.Close() })
	return r.c
}
