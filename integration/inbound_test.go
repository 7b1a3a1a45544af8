//go:build linux

package integration

import (
	"fmt"
	"strings"
	"testing"
)

// spoofed is one packet the scapy peer seals with a valid key: sequence
// number and inner addresses.
type spoofed struct {
	seq      uint64
	src, dst string
}

func packetList(ps []spoofed) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = fmt.Sprintf("%#x/%s/%s", p.seq, p.src, p.dst)
	}
	return strings.Join(s, ",")
}

// scapySend has the scapy peer in B seal ps with the key of A's inbound SA
// and send them to A, raw or in UDP.
func scapySend(t *testing.T, p *pair, spec *tunnelSpec, raw bool, ps []spoofed) {
	t.Helper()
	args := []string{scapyPeerScript(t), "send", "--suite", spec.suite.name,
		"--key-in", fmt.Sprintf("%x", spec.keyBA), "--spi-in", fmt.Sprintf("%#x", spiBA), "--esn",
		"--local", underlayB4, "--remote", underlayA4, "--packets", packetList(ps)}
	if raw {
		args = append(args, "--raw")
	}
	out, err := p.b.run(scapyPython, args...)
	t.Logf("scapy send in %s:\n%s", p.b.name, out)
	if err != nil {
		t.Fatalf("scapy send: %v", err)
	}
}

// scapyPing has the scapy peer in B send echo requests from src to dst
// inside the tunnel, with sequence numbers seqs, and check A answers each.
func scapyPing(t *testing.T, p *pair, spec *tunnelSpec, src, dst string, seqs []uint64) {
	t.Helper()
	out, err := p.b.run(scapyPython, scapyPeerScript(t), "peer", "--suite", spec.suite.name,
		"--key-in", fmt.Sprintf("%x", spec.keyBA), "--spi-in", fmt.Sprintf("%#x", spiBA),
		"--key-out", fmt.Sprintf("%x", spec.keyAB), "--spi-out", fmt.Sprintf("%#x", spiAB),
		"--esn", "--local", underlayB4, "--remote", underlayA4,
		"--inner-local", src, "--inner-remote", dst, "--seqs", joinSeqs(seqs), "--timeout", "30")
	t.Logf("scapy peer in %s:\n%s", p.b.name, out)
	if err != nil {
		t.Fatalf("scapy peer: %v", err)
	}
	if res := parsePeerResult(t, out); res.Replies != len(seqs) {
		t.Fatalf("scapy peer: %d replies, want %d", res.Replies, len(seqs))
	}
}

// checkMismatch fails unless A counted want XfrmInStateMismatch and no
// other error, and its inbound SA accepted packets packets.
func checkMismatch(t *testing.T, d *daemon, want, packets uint64) {
	t.Helper()
	for name, v := range d.stats() {
		switch {
		case name == "XfrmInStateMismatch":
			if v != want {
				t.Errorf("A: XfrmInStateMismatch = %d, want %d", v, want)
			}
		case strings.HasPrefix(name, "Xfrm") && v != 0:
			t.Errorf("A: %s = %d, want 0", name, v)
		}
	}
	if in := d.saStats()[stateKey("in", spiBA)]; in.Packets != packets {
		t.Errorf("A inbound SA: %d packets, want %d", in.Packets, packets)
	}
}

// TestInboundSelectorSpoof: the peer holds a valid SA (scapy, with the
// key of A's inbound SA) but sends packets whose inner source, or
// destination, is outside the SA's selector. A decrypts them, refuses them
// (RFC 4301 §5.2), counts them as XfrmInStateMismatch, and nothing of them
// reaches its TUN device (tcpdump on it), while a packet inside the
// selector still gets through and is answered.
func TestInboundSelectorSpoof(t *testing.T) {
	for _, tc := range []struct {
		name     string
		selector string // A's inbound SA's
		src, dst string // inside the selector
		spoofed  []spoofed
	}{
		{"ipv4", "{src: 203.0.113.0/25, dst: 198.51.100.0/24}", innerB4, innerA4, []spoofed{
			{1, "203.0.113.200", innerA4}, // routed into the tunnel at A, outside the /25
			{2, "192.0.2.66", innerA4},
			{3, "10.99.0.1", innerA4},
			{4, innerB4, "198.18.0.1"}, // destination outside
			{5, "2001:db8:b::1", innerA6},
		}},
		{"ipv6", "{src: \"2001:db8:b::/64\", dst: \"2001:db8:a::/64\"}", innerB6, innerA6, []spoofed{
			{1, "2001:db8:c::66", innerA6},
			{2, "2001:db8:b:1::1", innerA6},
			{3, innerB6, "2001:db8:a:1::1"},
			{4, innerB4, innerA4},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := tunnelSpec{suite: suiteByName("aes-gcm-128"), esn: true, window: 64,
				extraA: "    selector: " + tc.selector + "\n"} // the last state of A: its inbound one
			cfgA, _ := spec.configs()
			p := newPair(t)
			da := startDaemon(t, p.a, cfgA)
			stop := capture(t, p.a, "ipsec1")

			scapySend(t, p, &spec, false, tc.spoofed)
			scapyPing(t, p, &spec, tc.src, tc.dst, []uint64{10, 11})

			seen := stop()
			for _, s := range tc.spoofed {
				if strings.Contains(seen, s.src+" > "+s.dst) {
					t.Errorf("the spoofed packet %s -> %s reached A's TUN device:\n%s", s.src, s.dst, seen)
				}
			}
			if !strings.Contains(seen, tc.src+" > "+tc.dst) {
				t.Errorf("no packet %s -> %s inside the selector on A's TUN device:\n%s", tc.src, tc.dst, seen)
			}
			// The spoofed packets authenticated: they moved the window
			// and count as the SA's, as in Linux.
			checkMismatch(t, da, uint64(len(tc.spoofed)), uint64(len(tc.spoofed)+2))
		})
	}
}

// TestEncapMismatchRaw: with raw ESP open on A's underlay, the peer sends
// raw ESP for A's ESP-in-UDP SA. As Linux's xfrm_input, A drops each
// before its window (XfrmInStateMismatch), and nothing reaches its TUN;
// the same SA's packets in UDP go through.
func TestEncapMismatchRaw(t *testing.T) {
	spec := tunnelSpec{suite: suiteByName("aes-gcm-128"), esn: true, window: 64}
	cfgA, _ := spec.configs()
	cfgA = strings.Replace(cfgA, "raw_esp: false", "raw_esp: true", 1)
	p := newPair(t)
	da := startDaemon(t, p.a, cfgA)
	stop := capture(t, p.a, "ipsec1")

	raw := []spoofed{{1, innerB4, innerA4}, {2, innerB4, innerA4}, {3, innerB4, innerA4}}
	scapySend(t, p, &spec, true, raw)
	scapyPing(t, p, &spec, innerB4, innerA4, []uint64{10, 11})

	seen := stop()
	if n := strings.Count(seen, innerB4+" > "+innerA4+": ICMP echo request"); n != 2 {
		t.Errorf("%d echo requests on A's TUN device, want 2 (the pings in UDP):\n%s", n, seen)
	}
	// The raw packets were dropped before the window: the SA counted
	// only the pings.
	checkMismatch(t, da, uint64(len(raw)), 2)
}
