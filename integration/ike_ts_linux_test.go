//go:build linux

package integration

import (
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestIKETrafficSelectors: A proposes its local_ts as the two halves of
// the /24 that B allows as its remote_ts (the review's case: before, a
// child whose selectors were not one prefix each side was installed as
// "any"). Both halves cross; a packet from a third address in A's
// namespace reaches nothing of B: A's own outbound SA does not take it
// (XfrmOutNoStates), and when a peer seals it anyway under A's outbound
// keys (from A's state list --keys, as an authenticated peer that ignores
// its selectors would), B's inbound SA drops it after decryption
// (XfrmInStateMismatch). tcpdump on B's interface sees neither.
func TestIKETrafficSelectors(t *testing.T) {
	const (
		upper = "198.51.100.200" // A's address in the upper half
		third = "10.99.0.1"      // in no selector
	)
	p := newPair(t)
	b := startDaemon(t, p.b, ikeSideRaw(false, underlayB4, underlayB4, underlayA4, "b.example.net", "a.example.net", innerB4, prefix24(innerA4), "none", ""))
	cfgA := ikeSideRaw(false, underlayA4, underlayA4, underlayB4, "a.example.net", "b.example.net", innerA4, prefix24(innerB4), "start", "")
	halves := "local_ts: [198.51.100.0/25, 198.51.100.128/25]"
	cfgA = strings.Replace(cfgA, "local_ts: [198.51.100.0/24]", halves, 1)
	if !strings.Contains(cfgA, halves) {
		t.Fatalf("A's config has no %s:\n%s", halves, cfgA)
	}
	a := startDaemon(t, p.a, cfgA)
	a.waitIKE("a child", anyChild)
	sa := b.waitIKE("a child", anyChild)
	if got := strings.Join(sa.Children[0].RemoteTS, " "); got != "198.51.100.0/25 198.51.100.128/25" {
		t.Errorf("B's child: remote_ts %s, want the two halves", got)
	}
	// The SAs carry the whole set.
	wantSel := "sel src 198.51.100.0/25,198.51.100.128/25 dst 203.0.113.0/24"
	if out := b.mustCtl(t, "state", "list"); !strings.Contains(out, wantSel) {
		t.Errorf("B's state list has no %q:\n%s", wantSel, out)
	}

	ping(t, p.a, innerB4, 3) // from innerA4, the lower half
	p.a.mustRun(t, "ip", "addr", "add", upper+"/32", "dev", "ipsec1")
	p.a.mustRun(t, "ip", "addr", "add", third+"/32", "dev", "ipsec1")
	if out, err := p.a.run("ping", "-n", "-q", "-c", "3", "-i", "0.2", "-w", "15", "-I", upper, innerB4); err != nil || !strings.Contains(out, " 3 received") {
		t.Fatalf("ping from the upper half %s: %v\n%s", upper, err, out)
	}

	seen := capture(t, p.b, "ipsec1", "host", third)
	beforeA, beforeB := a.stats(), b.stats()
	if out, err := p.a.run("ping", "-n", "-q", "-c", "3", "-i", "0.2", "-W", "1", "-I", third, innerB4); err == nil {
		t.Errorf("ping from %s was answered:\n%s", third, out)
	}
	if got := a.stats()["XfrmOutNoStates"] - beforeA["XfrmOutNoStates"]; got < 3 {
		t.Errorf("A: XfrmOutNoStates rose by %d for 3 pings from %s, want 3: its outbound SA sealed them", got, third)
	}

	// A peer that ignores its selectors: the same packet sealed with A's
	// outbound SA's key and SPI, past A's sequence numbers.
	out := outboundSA(t, a)
	key, err := hex.DecodeString(strings.TrimPrefix(out.AEAD.Key, "0x"))
	if err != nil || len(key) != 20 {
		t.Fatalf("A's outbound key %q: %v", out.AEAD.Key, err)
	}
	spi, _ := strconv.ParseUint(out.SPI, 0, 32)
	g := newGCMSealer(t, key, uint32(spi))
	inject(t, p.a, false, underlayB4, g.seal(uint32(out.Stats.Seq+100), ipv4Echo(third, innerB4), []byte{1, 2}, 2, 4))
	mismatch := func() uint64 { return b.stats()["XfrmInStateMismatch"] - beforeB["XfrmInStateMismatch"] }
	for deadline := time.Now().Add(5 * time.Second); mismatch() == 0 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	if got := mismatch(); got != 1 {
		t.Errorf("B: XfrmInStateMismatch rose by %d for the packet from %s sealed under A's keys, want 1", got, third)
	}
	text := seen()
	if strings.Contains(text, third+" >") {
		t.Errorf("packets from %s reached B's interface:\n%s", third, text)
	}
	t.Logf("from %s: A's XfrmOutNoStates +%d, B's XfrmInStateMismatch +%d, packets on B's ipsec1: %d",
		third, a.stats()["XfrmOutNoStates"]-beforeA["XfrmOutNoStates"], mismatch(), strings.Count(text, third+" >"))
	ping(t, p.a, innerB4, 3) // the tunnel still works
}

// outboundSA returns the daemon's outbound SA of ipsec1 (IKE's), with its
// key.
func outboundSA(t *testing.T, d *daemon) stateJSON {
	t.Helper()
	text := d.mustCtl(t, "state", "list", "--keys", "--json")
	var all []stateJSON
	if err := json.Unmarshal([]byte(text), &all); err != nil {
		t.Fatalf("state list --keys --json: %v\n%s", err, text)
	}
	for _, s := range all {
		if s.Dir == "out" && s.IfID == 1 && s.AEAD != nil {
			return s
		}
	}
	t.Fatalf("no outbound SA of if_id 1:\n%s", text)
	return stateJSON{}
}
