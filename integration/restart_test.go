//go:build linux

package integration

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKillRestartNoNonceReuse: A and B run a tunnel with static AES-GCM
// keys (ESN). While A pings B as fast as it can, A's daemon is killed with
// SIGKILL (no clean stop, no final write) and started again with the same
// file and state_dir. Captured on the veth:
//
//   - no sequence number of A's outbound SA from the first run is sent
//     again in the second (under GCM, the same number is the same nonce),
//     and the second run starts above the first;
//   - the tunnel carries traffic again at once: B, which did not restart,
//     accepts A's new numbers (before, A started again at 1 and B's
//     replay window dropped everything until A passed its old top);
//   - B's packets to A captured during the first run, sent again to the
//     restarted A, are all refused as replays (before, A's window started
//     empty and took them all).
func TestKillRestartNoNonceReuse(t *testing.T) {
	p := newPair(t)
	spec := tunnelSpec{suite: suiteByName("aes-gcm-128"), esn: true}
	cfgA, cfgB := spec.configs()
	da := startDaemon(t, p.a, cfgA)
	startDaemon(t, p.b, cfgB)
	ping(t, p.a, innerB4, 2)

	espFrom := func(src, dst string) string {
		return "src host " + src + " and dst host " + dst + " and udp and dst port 4500"
	}
	dir := t.TempDir()
	capRun1 := filepath.Join(dir, "a-run1.pcap")
	stopRun1 := captureFile(t, p.b, "veth1", capRun1, espFrom(underlayA4, underlayB4))

	// B's packets to A during the first run, for the replay at the end.
	capBA := filepath.Join(dir, "b-to-a.pcap")
	stopBA := captureFile(t, p.b, "veth1", capBA, espFrom(underlayB4, underlayA4))
	ping(t, p.a, innerB4, 20)
	stopBA()
	fromB := espOfSPI(t, capBA, spiBA)
	if len(fromB) < 20 {
		t.Fatalf("captured %d ESP packets of B to A, want 20", len(fromB))
	}

	// The stream: a ping every 10 ms for 10 s, through the kill and the
	// restart (its sends fail while A's TUN is gone).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	flood := p.a.cmd(ctx, "ping", "-n", "-q", "-i", "0.01", "-w", "10", innerB4)
	if err := flood.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { flood.Process.Kill(); flood.Wait() }()
	// Long enough that A's replay top of the pings above was saved (it is
	// written every 100 ms).
	time.Sleep(1 * time.Second)

	if err := da.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-da.done:
	case <-time.After(10 * time.Second):
		t.Fatal("ipsecd did not die of SIGKILL")
	}
	if strings.Contains(da.log.String(), "stopping") {
		t.Fatalf("ipsecd stopped cleanly, want it killed:\n%s", da.log.String())
	}
	stopRun1()
	run1 := seqsOf(espOfSPI(t, capRun1, spiAB))
	if len(run1) < 30 {
		t.Fatalf("first run: %d ESP packets of A captured, want a stream", len(run1))
	}

	capRun2 := filepath.Join(dir, "a-run2.pcap")
	stopRun2 := captureFile(t, p.b, "veth1", capRun2, espFrom(underlayA4, underlayB4))
	da.start() // the same file, the same state_dir
	// The stream goes on through the restarted daemon for a while.
	time.Sleep(2 * time.Second)
	stopRun2()
	run2 := seqsOf(espOfSPI(t, capRun2, spiAB))
	t.Logf("A's outbound SA: first run %d packets, seq %d..%d; after the restart %d packets, seq %d..%d",
		len(run1), run1[0], run1[len(run1)-1], len(run2), first(run2), last(run2))
	if len(run2) == 0 {
		t.Fatal("A sent nothing after the restart")
	}
	var again []uint32
	for _, s := range run2 {
		if _, seen := slices.BinarySearch(run1, s); seen {
			again = append(again, s)
		}
	}
	if len(again) != 0 {
		t.Errorf("%d sequence numbers of A's first run sent again after the restart (same key: same GCM nonce), e.g. %v",
			len(again), again[:min(len(again), 5)])
	}
	if run2[0] <= run1[len(run1)-1] {
		t.Errorf("after the restart A starts at seq %d, not above the first run's %d", run2[0], run1[len(run1)-1])
	}

	// Traffic resumes at once: the peer, which kept running, takes the
	// restarted A's packets.
	flood.Process.Kill()
	flood.Wait()
	ping(t, p.a, innerB4, 3)

	// The replay: B's first-run packets to A, sent to the restarted A.
	in := stateKey("in", spiBA)
	before, beforeSA := da.stats(), da.saStats()[in]
	resend(t, p.b, underlayA4, fromB)
	want := uint64(len(fromB))
	after, afterSA := waitCounters(t, da, in, before, map[string]uint64{"XfrmInStateSeqError": want}, beforeSA)
	refused := (afterSA.Replay - beforeSA.Replay) + (afterSA.ReplayWindow - beforeSA.ReplayWindow)
	if got := after["XfrmInStateSeqError"] - before["XfrmInStateSeqError"]; got != want || refused != want {
		t.Errorf("replay of %d first-run packets of B into the restarted A: XfrmInStateSeqError +%d, SA replay+replay-window +%d; want all %d refused",
			want, got, refused, want)
	}
	if got := afterSA.Packets - beforeSA.Packets; got >= want {
		t.Errorf("A's inbound SA took %d packets during the replay of %d", got, want)
	}
	mustBeAlive(t, da, "replay after restart")
}

// espOfSPI returns the ESP-in-UDP packets with SPI spi in a pcap file.
func espOfSPI(t *testing.T, path string, spi uint32) [][]byte {
	t.Helper()
	pkts, err := readPcapESP(path, false)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, b := range pkts {
		if len(b) >= 8 && binary.BigEndian.Uint32(b) == spi {
			out = append(out, b)
		}
	}
	return out
}

// seqsOf returns the packets' sequence numbers, sorted.
func seqsOf(pkts [][]byte) []uint32 {
	s := make([]uint32, len(pkts))
	for i, p := range pkts {
		s[i] = espSeq(p)
	}
	slices.Sort(s)
	return s
}

func first(s []uint32) uint32 {
	if len(s) == 0 {
		return 0
	}
	return s[0]
}

func last(s []uint32) uint32 {
	if len(s) == 0 {
		return 0
	}
	return s[len(s)-1]
}

// resend sends pkts from ns to dst's ESP-in-UDP port, all from one helper
// (see inject).
func resend(t *testing.T, ns *netns, dst string, pkts [][]byte) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{dst}
	for _, p := range pkts {
		args = append(args, hex.EncodeToString(p))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := ns.cmd(ctx, self, args...)
	cmd.Env = append(os.Environ(), helperEnv+"=send-udp")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("send-udp in %s: %v\n%s", ns.name, err, out)
	}
}
