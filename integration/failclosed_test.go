//go:build linux

package integration

import (
	"fmt"
	"strings"
	"testing"
)

// TestFailClosed checks that what A routes into its interface and may not
// protect is dropped and counted, and never crosses the veth in clear:
// without an outbound SA (XfrmOutNoStates), and with an outbound SA whose
// interface's policy blocks the traffic (XfrmOutPolBlock).
func TestFailClosed(t *testing.T) {
	const blockV4 = `policies:
  - {dir: out, if_id: 1, src: 198.51.100.0/24, dst: 203.0.113.0/24, action: block}
`
	// Policies allow only IPv4: the IPv6 packets match none and are
	// blocked too (an interface with policies allows only what one allows).
	const allowV4 = `policies:
  - {dir: out, if_id: 1, src: 198.51.100.0/24, dst: 203.0.113.0/24, action: allow}
`
	for _, tt := range []struct {
		name    string
		spec    tunnelSpec
		counter string
		// pass is the inner destination that must still work, if any.
		pass string
	}{
		{"no outbound SA", tunnelSpec{noOutA: true}, "XfrmOutNoStates", ""},
		{"policy blocks", tunnelSpec{extraA: blockV4}, "XfrmOutPolBlock", ""},
		{"policy allows IPv4 only", tunnelSpec{extraA: allowV4}, "XfrmOutPolBlock", innerB4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			spec := tt.spec
			spec.suite = suiteByName("aes-gcm-128")
			p := newPair(t)
			cfgA, cfgB := spec.configs()
			da := startDaemon(t, p.a, cfgA)
			startDaemon(t, p.b, cfgB)

			if tt.pass != "" {
				ping(t, p.a, tt.pass, 2)
			}
			before := da.stats()
			stop := capture(t, p.a, "veth0")
			sent := 0
			for _, dst := range []string{innerB4, innerB6} {
				if dst == tt.pass {
					continue
				}
				const count = 5
				out, err := p.a.run("ping", "-n", "-q", "-c", fmt.Sprint(count), "-i", "0.2", "-W", "1", dst)
				if err == nil || !strings.Contains(out, " 0 received") {
					t.Errorf("ping %s from A: want no answer, got err %v:\n%s", dst, err, out)
				}
				sent += count
				// A TCP connection attempt: its SYNs must not leak either.
				p.a.run("timeout", "1", "bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/%s/5201", dst))
			}
			dump := stop()
			_, _, other := classifyCapture(dump)
			esp := espFrom(dump, underlayA4) // B's own stray packets may reach A sealed
			after := da.stats()

			got := after[tt.counter] - before[tt.counter]
			// Pings, plus TCP SYNs and their retransmissions, plus the odd
			// IPv6 router solicitation.
			if got < uint64(sent) || got > uint64(sent)+12 {
				t.Errorf("A's %s grew by %d, want %d to %d", tt.counter, got, sent, sent+12)
			}
			if tt.pass == "" && esp != 0 {
				t.Errorf("veth0 carried %d ESP packets, want none: A has nothing to send them with", esp)
			}
			for _, line := range other {
				t.Errorf("veth0 carried a packet in clear: %s", line)
			}
			t.Logf("A sent %d pings, %s grew by %d; veth0: %d ESP from A, %d other", sent, tt.counter, got, esp, len(other))
		})
	}
}

// espFrom counts the ESP packets (raw or in UDP) from src in a tcpdump -n
// print.
func espFrom(dump, src string) int {
	n := 0
	for _, line := range strings.Split(dump, "\n") {
		if strings.Contains(line, "ESP(") && (strings.Contains(line, " "+src+" > ") || strings.Contains(line, " "+src+".4500 > ")) {
			n++
		}
	}
	return n
}
