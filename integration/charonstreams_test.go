//go:build linux

package integration

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// charonStreams is a numbered UDP stream each way between ipsecd in A and
// strongSwan's charon in B (TestIKEDaemonCharon, TestIKECharonRekey),
// with what tells on which side a datagram was lost: the stream's ESP
// captured on A's side of the wire, ipsecd's counters, and what charon's
// namespace dropped before charon read it.
type charonStreams struct {
	srcAB, srcBA, sinkAB, sinkBA *helperProc
	stopAB, stopBA               func() string
	wireAB, wireBA               string
	size                         int
	d                            *daemon
	charonPid                    int
	before                       charonDrops
	statsBefore                  map[string]uint64
}

// startCharonStreams starts the captures and the streams, rate datagrams
// of size bytes a second each way, between innerA4 in p.a (ipsecd d)
// and innerB4 in p.b (charon, process charonPid).
func startCharonStreams(t *testing.T, p *pair, d *daemon, charonPid, rate, size int) *charonStreams {
	t.Helper()
	dir := t.TempDir()
	s := &charonStreams{wireAB: filepath.Join(dir, "ab.pcap"), wireBA: filepath.Join(dir, "ba.pcap"), size: size, d: d, charonPid: charonPid}
	s.stopAB = captureFile(t, p.a, "veth0", s.wireAB, "src", "host", underlayA4, "and", "udp", "port", "4500")
	s.stopBA = captureFile(t, p.a, "veth0", s.wireBA, "dst", "host", underlayA4, "and", "udp", "port", "4500")
	s.statsBefore, s.before = d.stats(), readCharonDrops(t, charonPid)
	s.sinkAB = startHelperProc(t, p.b, "udp-seq-sink", true, fmt.Sprintf("%s:%d", innerB4, udpPortAB))
	s.sinkBA = startHelperProc(t, p.a, "udp-seq-sink", true, fmt.Sprintf("%s:%d", innerA4, udpPortBA))
	s.srcAB = startHelperProc(t, p.a, "udp-seq-source", false, fmt.Sprintf("%s:%d", innerB4, udpPortAB), fmt.Sprint(rate), fmt.Sprint(size))
	s.srcBA = startHelperProc(t, p.b, "udp-seq-source", false, fmt.Sprintf("%s:%d", innerA4, udpPortBA), fmt.Sprint(rate), fmt.Sprint(size))
	return s
}

// charonDrops is what charon's namespace dropped that ipsecd never
// handled: ESP in UDP for charon's socket dropped for a full receive
// buffer (Udp RcvbufErrors, A→B), and packets for charon to seal that
// kernel-libipsec's TUN device ipsec0 dropped for a full queue (its
// transmit drops, B→A). On a loaded machine (2 cores, the suite's
// packages in parallel) charon's threads stall for long enough.
type charonDrops struct{ rcvbuf, tun int64 }

func readCharonDrops(t *testing.T, pid int) charonDrops {
	t.Helper()
	return charonDrops{rcvbuf: udpRcvbufErrors(t, pid), tun: tunTxDropped(t, pid, "ipsec0")}
}

// tunTxDropped is the transmit drop count of device dev in the network
// namespace of process pid (/proc/PID/net/dev), 0 while it is absent.
func tunTxDropped(t *testing.T, pid int, dev string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/dev", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		name, counts, ok := strings.Cut(l, ":")
		if !ok || strings.TrimSpace(name) != dev {
			continue
		}
		// receive: bytes packets errs drop fifo frame compressed
		// multicast; transmit: bytes packets errs drop ...
		f := strings.Fields(counts)
		if len(f) < 12 {
			t.Fatalf("/proc/%d/net/dev: %q", pid, l)
		}
		v, _ := strconv.ParseInt(f[11], 10, 64)
		return v
	}
	return 0
}

// streamESP counts the ESP datagrams of the stream in a capture: IKE
// (SPI 0, the non-ESP marker), NAT keepalives and pings are shorter.
func (s *charonStreams) streamESP(path, said string) (int64, bool) {
	pkts, err := readPcapESP(path, false)
	var n int64
	for _, p := range pkts {
		if len(p) >= s.size+28 && binary.BigEndian.Uint32(p) != 0 {
			n++
		}
	}
	m := captureDropped.FindStringSubmatch(said)
	return n, err == nil && m != nil && m[1] == "0"
}

// stopAndCheck ends the streams and requires every datagram to arrive
// once, but for those charon's namespace dropped before charon read
// them (charonDrops), which are logged: all of that direction's ESP on
// the wire at ipsecd's side as it should be, and no more lost than
// charon's namespace counted. ipsecd's counters are logged where they
// moved. It returns what each source sent, A→B first.
func (s *charonStreams) stopAndCheck(t *testing.T) (sent [2]udpSourceReport) {
	t.Helper()
	var got [2]udpSinkReport
	s.srcAB.finishJSON(t, &sent[0])
	s.srcBA.finishJSON(t, &sent[1])
	s.sinkAB.finishJSON(t, &got[0])
	s.sinkBA.finishJSON(t, &got[1])
	said := [2]string{s.stopAB(), s.stopBA()}
	drops := readCharonDrops(t, s.charonPid)
	drops.rcvbuf -= s.before.rcvbuf
	drops.tun -= s.before.tun
	for i, dir := range []string{"A→B", "B→A"} {
		sent, got := sent[i], got[i]
		esp, whole := s.streamESP([]string{s.wireAB, s.wireBA}[i], said[i])
		t.Logf("UDP %s: sent %d, ESP on the wire at ipsecd's side %d (capture whole: %v), received %d, missing %d, duplicates %d, reordered %d, max delay %.1f ms; charon's namespace dropped %d for its full socket, %d at its TUN",
			dir, sent.Sent, esp, whole, got.Received, got.Missing, got.Duplicates, got.Reorders, got.MaxDelayMS, drops.rcvbuf, drops.tun)
		lost := sent.Sent - got.Received
		if lost == 0 && got.Missing == 0 && got.Duplicates == 0 {
			continue
		}
		// Lost in charon's namespace, not by ipsecd: A→B, all sealed
		// onto the wire by ipsecd; B→A, every one charon sealed opened
		// by ipsecd.
		charonLost := drops.rcvbuf
		byIpsecd := esp != sent.Sent
		if i == 1 {
			charonLost, byIpsecd = drops.tun, esp != got.Received
		}
		if whole && !byIpsecd && got.Duplicates == 0 && lost > 0 && lost <= charonLost {
			t.Logf("UDP %s: %d datagrams lost in charon's namespace, which counted as many dropped (charon stalled on this loaded machine)", dir, lost)
			continue
		}
		t.Errorf("UDP %s: sent %d, received %d, missing %d (first %v), duplicates %d: want all received once",
			dir, sent.Sent, got.Received, got.Missing, got.FirstMissing, got.Duplicates)
	}
	logDropCounters(t, "ipsecd", s.statsBefore, s.d.stats())
	return sent
}
