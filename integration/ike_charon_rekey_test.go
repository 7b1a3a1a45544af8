//go:build linux

package integration

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The streams of TestIKECharonRekey: slower than TestRotation's, as
// charon's userspace data plane is the bottleneck here.
const (
	ikeUDPRate = 1000 // datagrams per second, each way
	ikeUDPSize = 256
)

// charonIKERE finds the unique id of charon's IKE SA: "test: #3, ESTABLISHED".
var charonIKERE = regexp.MustCompile(`test: #(\d+), ESTABLISHED`)

// charonIKE returns the unique ids of the IKE SAs charon lists as ESTABLISHED.
func (r *ikeRig) charonIKE() []string {
	var ids []string
	for _, m := range charonIKERE.FindAllStringSubmatch(r.ch.ListSAs(), -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// waitIKERekeyed waits up to 10 s for charon to list one established IKE
// SA that is not old, with the child still matching ipsecd's.
func (r *ikeRig) waitIKERekeyed(t *testing.T, what, old string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ids := r.charonIKE()
		ours, one := r.ipsecdChild()
		theirs := r.charonChildren()
		if len(ids) == 1 && ids[0] != old && one && len(theirs) == 1 && theirs[0] == (childSPIs{ours.out, ours.in}) {
			return ids[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: charon lists IKE SAs %v (old #%s) and children %+v, ipsecd %+v; charon:\n%s\nipsecd ike list:\n%s",
				what, ids, old, theirs, ours, r.ch.ListSAs(), r.ikeList())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestIKECharonRekey: while a numbered UDP stream runs each way through
// the tunnel, the child and then the IKE SA are rekeyed, each first by
// ipsecd (`ipsecd ike rekey`) and then by charon (`swanctl --rekey`).
// Every datagram arrives, once (make-before-break on both sides).
func TestIKECharonRekey(t *testing.T) {
	r := newIKERig(t, ikeSpec{})
	child := r.up(t, "ipsecd")
	ike := r.charonIKE()[0]
	// ESP on ipsecd's side of the wire, each way: where a datagram was
	// lost, it says on which side of the wire.
	dir := t.TempDir()
	wire := map[string]string{"A→B": filepath.Join(dir, "ab.pcap"), "B→A": filepath.Join(dir, "ba.pcap")}
	stopAB := captureFile(t, r.p.a, "veth0", wire["A→B"], "src", "host", underlayA4, "and", "udp", "port", "4500")
	stopBA := captureFile(t, r.p.a, "veth0", wire["B→A"], "dst", "host", underlayA4, "and", "udp", "port", "4500")

	sinkAB := startHelperProc(t, r.p.b, "udp-seq-sink", true, fmt.Sprintf("%s:%d", innerB4, udpPortAB))
	sinkBA := startHelperProc(t, r.p.a, "udp-seq-sink", true, fmt.Sprintf("%s:%d", innerA4, udpPortBA))
	srcAB := startHelperProc(t, r.p.a, "udp-seq-source", false, fmt.Sprintf("%s:%d", innerB4, udpPortAB), fmt.Sprint(ikeUDPRate), fmt.Sprint(ikeUDPSize))
	srcBA := startHelperProc(t, r.p.b, "udp-seq-source", false, fmt.Sprintf("%s:%d", innerA4, udpPortBA), fmt.Sprint(ikeUDPRate), fmt.Sprint(ikeUDPSize))
	time.Sleep(time.Second)
	before := r.d.stats()
	charonOverflows := udpRcvbufErrors(t, r.ch.Pid)

	for _, step := range []struct {
		by, what string
		rekey    func()
	}{
		{"ipsecd", "child", func() { r.ipsecdIKE(t, "rekey", "--child", "net") }},
		{"charon", "child", func() { r.swanctl(t, "--rekey", "--child", "net") }},
		{"ipsecd", "ike", func() { r.ipsecdIKE(t, "rekey", "--ike", "charon") }},
		{"charon", "ike", func() { r.swanctl(t, "--rekey", "--ike", "test") }},
	} {
		began := time.Now()
		step.rekey()
		what := step.by + " rekeying the " + step.what

		if step.what == "child" {
			child = r.waitUp(t, what, child)
		} else {
			ike = r.waitIKERekeyed(t, what, ike)
		}
		t.Logf("%s: done in %v: child in %08x out %08x, charon's IKE SA #%s", what, time.Since(began).Round(time.Millisecond), child.in, child.out, ike)
		time.Sleep(time.Second)
	}

	var sent [2]udpSourceReport
	var got [2]udpSinkReport
	srcAB.finishJSON(t, &sent[0])
	srcBA.finishJSON(t, &sent[1])
	sinkAB.finishJSON(t, &got[0])
	sinkBA.finishJSON(t, &got[1])
	captured := map[string]string{"A→B": stopAB(), "B→A": stopBA()}
	overflows := udpRcvbufErrors(t, r.ch.Pid) - charonOverflows
	t.Logf("UDP receive-buffer overflows in charon's namespace during the rekeys: %d", overflows)
	for i, dir := range []string{"A→B", "B→A"} {
		sent, got := sent[i], got[i]
		// ESP datagrams of the stream, the only ESP while it runs; IKE
		// (SPI 0, the non-ESP marker) and NAT keepalives left out.
		pkts, err := readPcapESP(wire[dir], false)
		esp := 0
		for _, p := range pkts {
			if len(p) >= 8 && binary.BigEndian.Uint32(p) != 0 {
				esp++
			}
		}
		onWire := fmt.Sprint(esp)
		if m := captureDropped.FindStringSubmatch(captured[dir]); err != nil || m == nil || m[1] != "0" {
			onWire = fmt.Sprintf("%d (capture incomplete: %v %q)", esp, err, captured[dir])
		}
		t.Logf("UDP %s: sent %d, ESP on the wire at ipsecd's side %s, received %d, missing %d, duplicates %d, reordered %d, max delay %.1f ms",
			dir, sent.Sent, onWire, got.Received, got.Missing, got.Duplicates, got.Reorders, got.MaxDelayMS)
		// charon's own socket overflowing on this loaded machine (2
		// shared cores) is not ipsecd's doing: A→B datagrams all on
		// the wire and as many lost as charon's namespace counted UDP
		// receive-buffer overflows are logged, not failed.
		if lost := sent.Sent - got.Received; dir == "A→B" && lost > 0 && got.Duplicates == 0 && int64(esp) == sent.Sent &&
			lost <= overflows {
			t.Logf("UDP A→B: %d datagrams lost after the wire, where charon's namespace counted as many UDP receive-buffer overflows (charon stalled)", lost)
			continue
		}
		if got.Received != sent.Sent || got.Missing != 0 || got.Duplicates != 0 {
			t.Errorf("UDP %s: sent %d, received %d, missing %d (first %v), duplicates %d: want all received once",
				dir, sent.Sent, got.Received, got.Missing, got.FirstMissing, got.Duplicates)
		}
		if least := int64(ikeUDPRate * 4); sent.Sent < least {
			t.Errorf("UDP %s: sent only %d datagrams, want at least %d to span the rekeys", dir, sent.Sent, least)
		}
	}
	// Where a datagram was lost, ipsecd's counters say which way it
	// was dropped (no SA yet: XfrmInNoStates).
	after := r.d.stats()
	for _, c := range []string{"XfrmInNoStates", "XfrmOutNoStates", "XfrmInStateProtoError", "XfrmInError", "XfrmOutError"} {
		if d := after[c] - before[c]; d != 0 {
			t.Logf("ipsecd %s went up by %d during the rekeys", c, d)
		}
	}
	if list := r.ch.ListSAs(); strings.Count(list, "INSTALLED") != 1 {
		t.Errorf("charon lists old children after the rekeys:\n%s", list)
	}
}

// udpRcvbufErrors is the count of UDP datagrams dropped for a full socket
// receive buffer in the network namespace of process pid
// (/proc/PID/net/snmp, Udp: RcvbufErrors).
func udpRcvbufErrors(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/snmp", pid))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, name := range names {
			if name == "RcvbufErrors" && i < len(f) {
				v, _ := strconv.ParseInt(f[i], 10, 64)
				return v
			}
		}
	}
	t.Fatalf("no Udp: RcvbufErrors in /proc/%d/net/snmp", pid)
	return 0
}
