//go:build linux

package integration

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// tcpBytes is how much TCP each tunnel test moves each way per inner
// family; IPSECD_TCP_BYTES overrides it (e.g. smaller for a quick run).
func tcpBytes() int64 {
	var n int64 = 64 << 20
	if s := os.Getenv("IPSECD_TCP_BYTES"); s != "" {
		fmt.Sscan(s, &n)
	}
	return n
}

// TestTunnel runs two real daemons joined by a veth pair in tunnel mode, in
// every suite, over ESP in UDP and raw ESP, with an IPv4 and an IPv6
// underlay, and checks ping and a checksummed TCP stream both ways for
// both inner families.
func TestTunnel(t *testing.T) {
	i := 0
	for _, s := range suites {
		for _, raw := range []bool{false, true} {
			for _, outer6 := range []bool{false, true} {
				// Half the cases run two queues per interface: with
				// ESN, reordering across queues beyond the replay
				// window shows up as integrity failures, which the
				// counters below catch.
				spec := tunnelSpec{suite: s, raw: raw, outer6: outer6, esn: i%2 == 0, queues: 1 + (i/4+i)%2}
				i++
				name := fmt.Sprintf("%s/%s/%s/esn=%v/queues=%d", s.name, encapName(raw), familyName(outer6), spec.esn, spec.queues)
				t.Run(name, func(t *testing.T) {
					p := newPair(t)
					cfgA, cfgB := spec.configs()
					da := startDaemon(t, p.a, cfgA)
					db := startDaemon(t, p.b, cfgB)

					ping(t, p.a, innerB4, 3)
					ping(t, p.b, innerA4, 3)
					ping(t, p.a, innerB6, 3)
					ping(t, p.b, innerA6, 3)

					n := tcpBytes()
					for _, dst := range [][2]string{{innerB4, innerA4}, {innerB6, innerA6}} {
						d := tcpTransfer(t, p.a, p.b, dst[0], n)
						t.Logf("A→B %s: %d bytes in %v (%.0f Mbit/s)", dst[0], n, d, float64(n*8)/d.Seconds()/1e6)
						d = tcpTransfer(t, p.b, p.a, dst[1], n)
						t.Logf("B→A %s: %d bytes in %v (%.0f Mbit/s)", dst[1], n, d, float64(n*8)/d.Seconds()/1e6)
					}
					for _, d := range []*daemon{da, db} {
						// Keys never reach the log, even at debug level.
						for _, k := range [][]byte{spec.keyAB, spec.keyBA} {
							if log := d.log.String(); strings.Contains(log, hexKey(k)[2:]) {
								t.Errorf("%s: the log holds key material:\n%s", d.ns.name, log)
							}
						}
						st := d.stats()
						for _, c := range []string{"XfrmInError", "XfrmInHdrError", "XfrmInStateSeqError", "XfrmInNoStates", "XfrmInStateProtoError", "XfrmOutNoStates", "XfrmOutError"} {
							if st[c] != 0 {
								t.Errorf("%s: %s = %d, want 0", d.ns.name, c, st[c])
							}
						}
					}
				})
			}
		}
	}
}

func encapName(raw bool) string {
	if raw {
		return "raw-esp"
	}
	return "espinudp"
}

func familyName(v6 bool) string {
	if v6 {
		return "ipv6"
	}
	return "ipv4"
}
