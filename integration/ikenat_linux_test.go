//go:build linux

package integration

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/internal/charontest"
)

// The addresses of TestIKENAT's three namespaces: A sits behind the NAT
// namespace on a private network; the NAT's outside address faces B.
const (
	natInsideA = "10.99.0.1"   // A, on the private side
	natInside  = "10.99.0.254" // the NAT's private side, A's default route
	natOutside = underlayA4    // the NAT's public address, on B's network
)

// natTriple is A behind a masquerading NAT namespace, and B outside it.
type natTriple struct {
	a, nat, b *netns
}

// newNATTriple builds the namespaces and the NAT: nftables masquerades
// what leaves towards B, with source ports mapped into [from, to] (so
// that a mapping is never the identity, and a new range shows a new
// mapping).
func newNATTriple(t *testing.T, from, to int) *natTriple {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft is not installed (scripts/test.sh installs nftables)")
	}
	n := &natTriple{a: newNetns(t), nat: newNetns(t), b: newNetns(t)}
	n.a.mustRun(t, "ip", "link", "add", "veth0", "type", "veth", "peer", "name", "in0", "netns", n.nat.name)
	n.nat.mustRun(t, "ip", "link", "add", "out0", "type", "veth", "peer", "name", "veth1", "netns", n.b.name)
	for _, l := range []struct {
		ns   *netns
		dev  string
		addr string
	}{{n.a, "veth0", natInsideA}, {n.nat, "in0", natInside}, {n.nat, "out0", natOutside}, {n.b, "veth1", underlayB4}} {
		l.ns.mustRun(t, "ip", "addr", "add", l.addr+"/24", "dev", l.dev)
		l.ns.mustRun(t, "ip", "link", "set", l.dev, "up")
	}
	n.a.mustRun(t, "ip", "route", "add", "default", "via", natInside)
	n.nat.mustRun(t, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	n.setMasquerade(t, from, to)
	return n
}

// setMasquerade (re)writes the NAT's rules: UDP and TCP leaving towards
// B take a source port in [from, to]; the rest (ICMP) plain masquerade.
func (n *natTriple) setMasquerade(t *testing.T, from, to int) {
	t.Helper()
	rules := fmt.Sprintf(`table ip nat
delete table ip nat
table ip nat {
	chain post {
		type nat hook postrouting priority srcnat;
		oifname "out0" meta l4proto { tcp, udp } masquerade to :%d-%d
		oifname "out0" masquerade
	}
}
`, from, to)
	cmd := n.nat.cmd(t.Context(), "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft in %s: %v\n%s", n.nat.name, err, out)
	}
}

// TestIKENAT: A behind a masquerading NAT initiates to B (remote_addrs
// %any), both `ipsecd run` with raw ESP available, so that nothing but
// NAT detection puts ESP in UDP and IKE on port 4500. Ping and TCP cross.
// Then, while numbered UDP datagrams flow each way and a paced TCP stream
// from A to B, the NAT moves its mapping to another port range and its
// conntrack table is flushed: B must follow A's new address and port for
// IKE and for its outbound ESP SA (RFC 7296 §2.23) after A's next
// authenticated IKE message, and traffic resume within a few seconds;
// the TCP stream arrives whole. The log gives how long the streams
// paused.
func TestIKENAT(t *testing.T) {
	if _, err := exec.LookPath("conntrack"); err != nil {
		t.Skip("conntrack is not installed (scripts/test.sh installs it)")
	}
	n := newNATTriple(t, 10000, 10999)
	b := startDaemon(t, n.b, ikeSideRaw(true, underlayB4, underlayB4, `"%any"`, "b.example.net", "a.example.net", innerB4, prefix24(innerA4), "none", ""))
	b.waitLogCount(t, "ike: 1 connections", 1) // A's first IKE_SA_INIT finds B's IKE running
	a := startDaemon(t, n.a, ikeSideRaw(true, natInsideA, natInsideA, underlayB4, "a.example.net", "b.example.net", innerA4, prefix24(innerB4), "start", ""))

	sa := a.waitIKE("a child", anyChild)
	if !sa.NAT || !sa.Children[0].Encap || sa.Remote.Port() != 4500 {
		t.Fatalf("A's IKE SA behind the NAT: %+v; want NAT detected, the child in UDP, IKE on port 4500", sa)
	}
	bsa := b.waitIKE("a child", anyChild)
	if !bsa.NAT || !bsa.Children[0].Encap || bsa.Remote.Addr().String() != natOutside || bsa.Remote.Port() < 10000 || bsa.Remote.Port() > 10999 {
		t.Fatalf("B's IKE SA: %+v; want A at %s with a port in 10000-10999, ESP in UDP", bsa, natOutside)
	}
	ping(t, n.a, innerB4, 3)
	ping(t, n.b, innerA4, 3)
	tcpTransfer(t, n.a, n.b, innerB4, 1<<20)

	n.changeMapping(t, func() bool {
		return b.ikeList()[0].Remote.Port() >= 20000
	})
	ping(t, n.b, innerA4, 3)
	if got := strings.Count(b.log.String(), "the child's outbound SA follows"); got < 1 {
		t.Errorf("B's log: %d lines saying the child's outbound SA followed the peer, want 1 or more", got)
	}
}

// changeMapping runs streams between A's and B's inner addresses (200
// datagrams/s each way, 2 Mbit/s of TCP from A to B), moves the NAT's
// masquerade to ports 20000-20999 and flushes its conntrack table, waits
// until followed says B follows A there, and checks that the streams
// resumed within 5 s and the TCP stream arrived whole. It logs how long
// each direction paused.
func (n *natTriple) changeMapping(t *testing.T, followed func() bool) {
	t.Helper()
	const rate = 200
	udp := startUDPBothWays(t, n.a, n.b, innerA4, innerB4, rate)
	tcpSink := startHelperProc(t, n.b, "tcp-sink", true, fmt.Sprintf("%s:%d", innerB4, tcpPort))
	tcpSrc := startHelperProc(t, n.a, "tcp-paced", false, fmt.Sprintf("%s:%d", innerB4, tcpPort), "2000000", fmt.Sprint(time.Now().UnixNano()))
	time.Sleep(time.Second)

	n.setMasquerade(t, 20000, 20999)
	n.nat.mustRun(t, "conntrack", "-F")
	changed := time.Now()
	for !followed() {
		if time.Since(changed) > 15*time.Second {
			t.Fatal("B did not follow A's new mapping within 15 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("B follows A's new mapping %.1f s after it changed", time.Since(changed).Seconds())
	time.Sleep(3 * time.Second)

	var tcpSent tcpPacedReport
	tcpSrc.finishJSON(t, &tcpSent)
	tcpGot := strings.TrimSpace(tcpSink.finish(t))
	for _, u := range udp.finish(t) {
		// Resumed within a few seconds, and kept flowing since: what
		// is missing is at most the pause's worth.
		if u.sink.MaxGapMS > 5000 || u.sink.Missing > 5*rate || u.sink.Received < u.src.Sent-5*rate {
			t.Errorf("UDP %s: paused %.0f ms, %d of %d missing: want the stream back within 5 s", u.dir, u.sink.MaxGapMS, u.sink.Missing, u.src.Sent)
		}
	}
	if want := fmt.Sprintf("%s %d", tcpSent.SHA256, tcpSent.Bytes); tcpGot != want {
		t.Errorf("TCP A→B through the mapping change: far end got %q, sent %q", tcpGot, want)
	}
}

// TestIKENATCharon is TestIKENAT with strongSwan's charon as B: ipsecd
// behind the NAT initiates to it, both with NAT detection only (charon's
// encap = no); ping crosses; after the mapping change charon follows
// ipsecd's new port (its IKE SA lists it) and the streams resume.
func TestIKENATCharon(t *testing.T) {
	charontest.Require(t)
	if _, err := exec.LookPath("conntrack"); err != nil {
		t.Skip("conntrack is not installed (scripts/test.sh installs it)")
	}
	n := newNATTriple(t, 10000, 10999)
	// kernel-libipsec routes remote_ts into its TUN from an address of
	// local_ts, and needs a route towards the peer's side to do it.
	n.b.mustRun(t, "ip", "addr", "add", innerB4+"/32", "dev", "lo")
	n.b.mustRun(t, "ip", "route", "add", "default", "via", natOutside)
	ch := charontest.StartQuiet(t, n.b.name, "")
	ch.Load(charontest.Conn{
		Name: "peer", LocalAddrs: underlayB4, RemoteAddrs: "%any", Proposals: "aes256-sha256-x25519",
		Local: charontest.Peer{ID: "b.example.net"}, Remote: charontest.Peer{ID: "a.example.net"},
		LocalTS: prefix24(innerB4) + "/24", RemoteTS: prefix24(innerA4) + "/24", ESP: "aes128gcm16",
		Secret: "0x6d79207475726e656c207365637265742c206e6f7420666f7220757365",
	}.String())
	a := startDaemon(t, n.a, ikeSideRaw(true, natInsideA, natInsideA, underlayB4, "a.example.net", "b.example.net", innerA4, prefix24(innerB4), "start", ""))
	sa := a.waitIKE("a child with charon", anyChild)
	if !sa.NAT || !sa.Children[0].Encap || sa.Remote.Port() != 4500 {
		t.Fatalf("ipsecd's IKE SA behind the NAT: %+v; want NAT detected, the child in UDP, IKE on port 4500", sa)
	}
	if l := ch.ListSAs(); !strings.Contains(l, natOutside+"[1") {
		t.Fatalf("charon does not list ipsecd at %s with a port in 10000-10999:\n%s", natOutside, l)
	}
	ping(t, n.a, innerB4, 3)
	ping(t, n.b, innerA4, 3)
	n.changeMapping(t, func() bool { return strings.Contains(ch.ListSAs(), natOutside+"[2") })
	ping(t, n.b, innerA4, 3)
}

// TestIKENATKeepalive: NAT keepalives keep the NAT's mapping alive
// through silence. The NAT forgets an idle UDP mapping after 25 s here
// (conntrack's UDP timeouts, per namespace), the daemons send a
// keepalive every 20 s and no liveness checks (dpd_delay 0s); after 32 s
// without traffic, B (outside, which cannot make a mapping) still
// reaches A. Without keepalives the ping is lost (seen: the NAT then
// holds only B's unreplied attempt). About 50 s; -short skips it.
func TestIKENATKeepalive(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 32 s of silence")
	}
	if _, err := exec.LookPath("conntrack"); err != nil {
		t.Skip("conntrack is not installed (scripts/test.sh installs it)")
	}
	n := newNATTriple(t, 10000, 10999)
	for _, k := range []string{"net.netfilter.nf_conntrack_udp_timeout=25", "net.netfilter.nf_conntrack_udp_timeout_stream=25"} {
		n.nat.mustRun(t, "sysctl", "-qw", k)
	}
	noDPD := func(cfg string) string { return strings.Replace(cfg, "dpd_delay: 2s", "dpd_delay: 0s", 1) }
	b := startDaemon(t, n.b, noDPD(ikeSideRaw(true, underlayB4, underlayB4, `"%any"`, "b.example.net", "a.example.net", innerB4, prefix24(innerA4), "none", "")))
	b.waitLogCount(t, "ike: 1 connections", 1) // A's first IKE_SA_INIT finds B's IKE running
	a := startDaemon(t, n.a, noDPD(ikeSideRaw(true, natInsideA, natInsideA, underlayB4, "a.example.net", "b.example.net", innerA4, prefix24(innerB4), "start", "")))
	a.waitIKE("a child", anyChild)
	b.waitIKE("a child", anyChild)
	ping(t, n.a, innerB4, 1)
	time.Sleep(32 * time.Second)
	if out, err := n.b.run("ping", "-n", "-c", "1", "-W", "2", innerA4); err != nil {
		t.Fatalf("ping from B to A after 32 s of silence (the NAT forgets a mapping after 25 s): %v\n%s\nNAT conntrack:\n%s",
			err, out, n.nat.mustRun(t, "conntrack", "-L"))
	}
}

// udpBothWays is a numbered UDP stream each way between two namespaces'
// inner addresses (udp-seq-source and udp-seq-sink).
type udpBothWays struct {
	srcAB, srcBA, sinkAB, sinkBA *helperProc
}

// udpDir is what one direction of udpBothWays sent and received.
type udpDir struct {
	dir  string
	src  udpSourceReport
	sink udpSinkReport
}

// startUDPBothWays starts rate datagrams/s from addrA in a to addrB in b
// and back.
func startUDPBothWays(t *testing.T, a, b *netns, addrA, addrB string, rate int) *udpBothWays {
	t.Helper()
	return &udpBothWays{
		sinkAB: startHelperProc(t, b, "udp-seq-sink", true, fmt.Sprintf("%s:%d", addrB, udpPortAB)),
		sinkBA: startHelperProc(t, a, "udp-seq-sink", true, fmt.Sprintf("%s:%d", addrA, udpPortBA)),
		srcAB:  startHelperProc(t, a, "udp-seq-source", false, fmt.Sprintf("%s:%d", addrB, udpPortAB), fmt.Sprint(rate), "256"),
		srcBA:  startHelperProc(t, b, "udp-seq-source", false, fmt.Sprintf("%s:%d", addrA, udpPortBA), fmt.Sprint(rate), "256"),
	}
}

// finish stops the sources, then the sinks, logs each direction and
// returns the reports, A→B first.
func (u *udpBothWays) finish(t *testing.T) []udpDir {
	t.Helper()
	ds := []udpDir{{dir: "A→B"}, {dir: "B→A"}}
	u.srcAB.finishJSON(t, &ds[0].src)
	u.srcBA.finishJSON(t, &ds[1].src)
	u.sinkAB.finishJSON(t, &ds[0].sink)
	u.sinkBA.finishJSON(t, &ds[1].sink)
	for _, d := range ds {
		t.Logf("UDP %s: sent %d, received %d, missing %d, duplicates %d, longest pause %.0f ms", d.dir, d.src.Sent, d.sink.Received, d.sink.Missing, d.sink.Duplicates, d.sink.MaxGapMS)
	}
	return ds
}
