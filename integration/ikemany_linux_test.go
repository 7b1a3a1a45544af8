//go:build linux

package integration

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/control"
)

// ikeManyPeers is how many IKE SAs TestIKEManyPeers brings up: 1000
// (32 s for the whole test on 2 shared cores), IPSECD_IKE_PEERS for
// another number.
func ikeManyPeers(t *testing.T) int {
	n := 1000
	if s := os.Getenv("IPSECD_IKE_PEERS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 2 || v > 60000 {
			t.Fatalf("IPSECD_IKE_PEERS=%q: want a number from 2 to 60000", s)
		}
		n = v
	}
	return n
}

const ikeManyPSK = "0x6d79207475726e656c207365637265742c206e6f7420666f7220757365"

// ikeManyInitiator is A's config with connections 0..n-1, each its own
// identity (a<i>.example.net) and its own child: A's host 10.1.x.y to B's
// 10.2.x.y (x.y = i+1), all through one interface; start_action start
// for every connection when start is set, none otherwise (then only
// connection 0 starts).
func ikeManyInitiator(n int, start bool) string {
	var b strings.Builder
	b.WriteString(`log: {level: info, format: text}
underlay: {udp: "0.0.0.0:4500"}
interfaces:
  - {name: ipsec1, if_id: 1, addresses: [10.1.0.1/16], routes: [10.2.0.0/16]}
ike: {port: 500}
connections:
`)
	for i := range n {
		action := "none"
		if start || i == 0 {
			action = "start"
		}
		host := fmt.Sprintf("%d.%d", (i+1)>>8, (i+1)&0xff)
		fmt.Fprintf(&b, `  - name: p%d
    local_addrs: [%s]
    remote_addrs: [%s]
    proposals: [aes256-sha256-x25519]
    local: {auth: psk, id: a%d.example.net}
    remote: {auth: psk, id: b.example.net}
    children:
      - {name: net%d, if_id: 1, local_ts: [10.1.%s/32], remote_ts: [10.2.%s/32], esp_proposals: [aes128gcm16], start_action: %s}
`, i, underlayA4, underlayB4, i, i, host, host, action)
	}
	fmt.Fprintf(&b, "secrets:\n  - {ids: [b.example.net], secret: %q}\n", ikeManyPSK)
	return b.String()
}

// ikeManyResponder is B's config: one connection for any peer at any
// address and any identity, whose child covers every initiator's /32s
// (the responder narrows to what each proposes). Every initiator is at
// one address, as peers behind one NAT are, and starts at once: no
// limit on half-open IKE SAs (block_threshold would let 5 of them at a
// time through).
const ikeManyResponder = `log: {level: info, format: text}
underlay: {udp: "0.0.0.0:4500"}
interfaces:
  - {name: ipsec1, if_id: 1, addresses: [10.2.0.1/16], routes: [10.1.0.0/16]}
ike: {port: 500, block_threshold: 0, init_limit_half_open: 0}
connections:
  - name: any
    local_addrs: [` + underlayB4 + `]
    remote_addrs: ["%any"]
    proposals: [aes256-sha256-x25519]
    local: {auth: psk, id: b.example.net}
    remote: {auth: psk, id: "%any"}
    children:
      - {name: net, if_id: 1, local_ts: [10.2.0.0/16], remote_ts: [10.1.0.0/16], esp_proposals: [aes128gcm16]}
secrets:
  - {ids: [b.example.net], secret: "` + ikeManyPSK + `"}
`

// upCount returns how many IKE SAs the daemon lists established with an
// installed child.
func (d *daemon) upCount() int {
	n := 0
	for _, s := range d.ikeList() {
		if s.State == "ESTABLISHED" && len(s.Children) > 0 && s.Children[0].State == "INSTALLED" {
			n++
		}
	}
	return n
}

// TestIKEManyPeers: one responder (remote_addrs %any, remote id %any)
// and an initiator with N connections, each its own identity and child
// (N = 1000, IPSECD_IKE_PEERS for another). Connection 0 comes up first and
// carries a numbered UDP stream each way; then a reload starts the other
// N-1 at once. All N must come up, on both sides, and the stream lose
// nothing while they do. The log gives the time to bring them up and the
// RSS each IKE SA with its child adds to each daemon.
func TestIKEManyPeers(t *testing.T) {
	n := ikeManyPeers(t)
	p := newPair(t)
	b := startDaemon(t, p.b, ikeManyResponder)
	cfgA := ikeManyInitiator(n, false)
	a := startDaemon(t, p.a, cfgA)
	a.waitIKE("connection 0's child", func(s control.IKESAInfo, _ control.IKEChildInfo) bool { return s.Name == "p0" })
	b.waitIKE("connection 0's child", anyChild)
	ping(t, p.a, "10.2.0.1", 3)

	const rate = 200
	udp := startUDPBothWays(t, p.a, p.b, "10.1.0.1", "10.2.0.1", rate)
	time.Sleep(500 * time.Millisecond)
	rssA, rssB := a.rssKiB(), b.rssKiB()

	start := time.Now()
	a.reload(t, ikeManyInitiator(n, true))
	bound := time.Duration(n)*50*time.Millisecond + 30*time.Second
	var upA, upB int
	for {
		upA, upB = a.upCount(), b.upCount()
		if upA == n && upB == n {
			break
		}
		if time.Since(start) > bound {
			t.Fatalf("after %v: %d of %d IKE SAs up on the initiator, %d on the responder", bound, upA, n, upB)
		}
		time.Sleep(250 * time.Millisecond)
	}
	took := time.Since(start)
	time.Sleep(500 * time.Millisecond)
	dA, dB := a.rssKiB()-rssA, b.rssKiB()-rssB
	t.Logf("%d IKE SAs with a child each up in %.2f s (%.0f per second); RSS added: initiator %d KiB (%.1f KiB per IKE SA), responder %d KiB (%.1f KiB per IKE SA)",
		n, took.Seconds(), float64(n-1)/took.Seconds(), dA, float64(dA)/float64(n-1), dB, float64(dB)/float64(n-1))

	for _, u := range udp.finish(t) {
		if u.sink.Received != u.src.Sent || u.sink.Missing != 0 || u.sink.Duplicates != 0 {
			t.Errorf("UDP %s: sent %d, received %d, missing %d (first %v), duplicates %d: want every datagram once", u.dir, u.src.Sent, u.sink.Received, u.sink.Missing, u.sink.FirstMissing, u.sink.Duplicates)
		}
	}
	// A child other than 0 carries traffic too: the last one.
	last := fmt.Sprintf("%d.%d", n>>8, n&0xff)
	p.a.mustRun(t, "ip", "addr", "add", "10.1."+last+"/32", "dev", "ipsec1")
	p.b.mustRun(t, "ip", "addr", "add", "10.2."+last+"/32", "dev", "ipsec1")
	if out, err := p.a.run("ping", "-n", "-c", "2", "-i", "0.2", "-w", "10", "-I", "10.1."+last, "10.2."+last); err != nil {
		t.Errorf("ping over connection %d's child: %v\n%s", n-1, err, out)
	}
}
