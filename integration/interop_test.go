//go:build linux

package integration

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/control"
)

// scapyPython is the interpreter that has Debian's python3-scapy; the
// python3 on PATH may be another one.
const scapyPython = "/usr/bin/python3"

// scapyPeerScript returns the absolute path of testdata/scapy_peer.py, and
// skips the test when scapy is not installed.
func scapyPeerScript(t *testing.T) string {
	t.Helper()
	if out, err := exec.Command(scapyPython, "-c", "import scapy.layers.ipsec").CombinedOutput(); err != nil {
		t.Skipf("scapy not available in %s (Debian python3-scapy): %v\n%s", scapyPython, err, out)
	}
	p, err := filepath.Abs(filepath.Join("testdata", "scapy_peer.py"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestScapySelfTest checks the independent side before it judges ipsecd:
// scapy opens the RFC 7634 Appendix A packet and seals it again bit for
// bit, opens the draft-mcgrew-gcm-test-01 cases (ESN AAD), and round-trips
// its own packets in every suite, with and without ESN, across 2^32.
func TestScapySelfTest(t *testing.T) {
	script := scapyPeerScript(t)
	out, err := exec.Command(scapyPython, script, "selftest").CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("scapy_peer.py selftest: %v", err)
	}
}

// TestScapyInterop puts an independent ESP implementation, scapy's
// SecurityAssociation, on the far side of one ipsecd. Only namespace A runs
// ipsecd (tunnel mode, ESN on); in namespace B testdata/scapy_peer.py seals
// ICMP echo requests 203.0.113.1 → 198.51.100.1 with the key of A's inbound
// SA, with sequence numbers that cross 2^32 (ESN high half 0 to 1), and
// sends them to A. ipsecd opens them into its TUN, A's kernel answers, and
// ipsecd seals the replies with its outbound SA (from seq 1); scapy opens
// those and checks each is the reply to its request. Both directions of
// every suite are thus checked against code ipsecd shares nothing with
// (for GCM with 64- and 96-bit ICVs, which scapy cannot truncate, the
// script's own RFC 4106 code on the cryptography package's GCM).
func TestScapyInterop(t *testing.T) {
	script := scapyPeerScript(t)
	for _, tc := range []struct {
		suite       string
		raw, outer6 bool
	}{
		{"aes-gcm-128", false, false},
		{"aes-gcm-256", false, false},
		{"chacha20-poly1305", false, false},
		{"aes-cbc-hmac-sha256", false, false},
		{"null-hmac-sha256", false, false},
		{"aes-gcm-128", false, true},
		{"chacha20-poly1305", false, true},
		{"aes-gcm-128", true, false},
		{"aes-cbc-hmac-sha256", true, true},
		{"aes-gcm-128-icv64", false, false},
		{"aes-gcm-128-icv64", true, true},
		{"aes-gcm-128-icv96", false, false},
	} {
		t.Run(fmt.Sprintf("%s/%s/%s", tc.suite, encapName(tc.raw), familyName(tc.outer6)), func(t *testing.T) {
			spec := tunnelSpec{suite: suiteByName(tc.suite), raw: tc.raw, outer6: tc.outer6, esn: true, window: 64}
			cfgA, _ := spec.configs()
			p := newPair(t)
			da := startDaemon(t, p.a, cfgA)

			seqs := crossingSeqs(spec.window)
			local, remote := underlayB4, underlayA4
			if tc.outer6 {
				local, remote = underlayB6, underlayA6
			}
			args := []string{script, "peer",
				"--suite", tc.suite,
				"--key-in", fmt.Sprintf("%x", spec.keyBA), "--spi-in", fmt.Sprintf("%#x", spiBA),
				"--key-out", fmt.Sprintf("%x", spec.keyAB), "--spi-out", fmt.Sprintf("%#x", spiAB),
				"--esn", "--local", local, "--remote", remote,
				"--inner-local", innerB4, "--inner-remote", innerA4,
				"--inner6-local", innerB6, "--inner6-remote", innerA6,
				"--seqs", joinSeqs(seqs), "--timeout", "40"}
			if tc.raw {
				args = append(args, "--raw")
			}
			out, err := p.b.run(scapyPython, args...)
			t.Logf("scapy peer in %s:\n%s", p.b.name, out)
			if err != nil {
				t.Fatalf("scapy peer: %v", err)
			}
			res := parsePeerResult(t, out)
			if res.Sent != len(seqs) || res.Replies != len(seqs) {
				t.Fatalf("scapy peer: sent %d, %d replies; want %d each", res.Sent, res.Replies, len(seqs))
			}

			// Every xfrm counter of A is an error counter: all must be 0.
			for name, v := range da.stats() {
				if strings.HasPrefix(name, "Xfrm") && v != 0 {
					t.Errorf("A: %s = %d, want 0", name, v)
				}
			}
			states := da.saStats()
			in, ok := states[stateKey("in", spiBA)]
			if !ok {
				t.Fatalf("A has no inbound SA %#x: %v", spiBA, states)
			}
			if in.Packets != uint64(len(seqs)) {
				t.Errorf("A inbound SA: %d packets, want %d (what scapy sent)", in.Packets, len(seqs))
			}
			if want := seqs[len(seqs)-1]; in.Seq != want {
				t.Errorf("A inbound SA: highest seq %#x, want %#x (ESN high half inferred)", in.Seq, want)
			}
			if in.Replay+in.ReplayWindow+in.IntegrityFailed != 0 {
				t.Errorf("A inbound SA: replay %d, replay-window %d, integrity-failed %d; want 0",
					in.Replay, in.ReplayWindow, in.IntegrityFailed)
			}
			outSA, ok := states[stateKey("out", spiAB)]
			if !ok {
				t.Fatalf("A has no outbound SA %#x: %v", spiAB, states)
			}
			// The outbound counter starts at 1 and has no gaps.
			if outSA.Seq != outSA.Packets {
				t.Errorf("A outbound SA: seq %#x after %d packets, want equal", outSA.Seq, outSA.Packets)
			}
			if outSA.Packets < uint64(res.ESPReceived) || outSA.Seq < res.LastSeqIn {
				t.Errorf("A outbound SA: %d packets, seq %#x; scapy opened %d packets up to seq %#x",
					outSA.Packets, outSA.Seq, res.ESPReceived, res.LastSeqIn)
			}
		})
	}
}

// crossingSeqs returns ESP sequence numbers for an inbound SA with ESN and
// a replay window of w that cross 2^32. The first must lie more than w
// below 2^32: an empty window (top 0) reads a low half within w of 2^32 as
// the tail of epoch -1 (RFC 4303 Appendix A2.2), which does not exist.
// Then a jump to just below 2^32, and on across it into high half 1.
func crossingSeqs(w int) []uint64 {
	const epoch = 1 << 32
	return []uint64{epoch - uint64(w) - 36, epoch - 3, epoch - 2, epoch - 1, epoch, epoch + 1, epoch + 2}
}

func joinSeqs(seqs []uint64) string {
	s := make([]string, len(seqs))
	for i, v := range seqs {
		s[i] = fmt.Sprintf("%#x", v)
	}
	return strings.Join(s, ",")
}

// peerResult is the RESULT line of scapy_peer.py peer.
type peerResult struct {
	Sent        int    `json:"sent"`
	Replies     int    `json:"replies"`
	ESPReceived int    `json:"esp_received"`
	Other       int    `json:"other"`
	LastSeqIn   uint64 `json:"last_seq_in"`
}

func parsePeerResult(t *testing.T, out string) peerResult {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if j, ok := strings.CutPrefix(line, "RESULT "); ok {
			var r peerResult
			if err := json.Unmarshal([]byte(j), &r); err != nil {
				t.Fatalf("scapy peer RESULT %q: %v", j, err)
			}
			return r
		}
	}
	t.Fatalf("scapy peer printed no RESULT line")
	return peerResult{}
}

// stateKey names an SA in saStats: "in/0x2001".
func stateKey(dir string, spi uint32) string { return dir + "/" + control.FormatSPI(spi) }

// saStats returns the counters of every SA of the daemon, by stateKey,
// from `ipsecd state list --json`.
func (d *daemon) saStats() map[string]control.StateStats {
	d.t.Helper()
	out, err := d.ctl("state", "list", "--json")
	if err != nil {
		d.t.Fatalf("ipsecd state list --json: %v\n%s", err, out)
	}
	var states []struct {
		SPI   string             `json:"spi"`
		Dir   string             `json:"dir"`
		Stats control.StateStats `json:"stats"`
	}
	if err := json.Unmarshal([]byte(out), &states); err != nil {
		d.t.Fatalf("ipsecd state list --json: %v\n%s", err, out)
	}
	m := make(map[string]control.StateStats, len(states))
	for _, s := range states {
		spi, err := control.ParseSPI(s.SPI)
		if err != nil {
			d.t.Fatalf("ipsecd state list --json: %v", err)
		}
		m[stateKey(s.Dir, spi)] = s.Stats
	}
	return m
}
