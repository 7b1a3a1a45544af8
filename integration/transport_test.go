//go:build linux

package integration

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// underlayMark is the SO_MARK of the daemons' own ESP in the tests that
// steer cleartext into a TUN by policy routing (transport mode).
const underlayMark = "0x100"

// transportSpec describes a transport-mode pair: the SAs protect traffic
// between the two namespaces' own underlay addresses, in both families.
type transportSpec struct {
	suite suite
	raw   bool
}

// side returns the config of one end. local4/6 are its underlay addresses,
// peer4/6 the other end's; spiOut/spiIn are the base SPIs (IPv6 uses +1).
// Each family has its own SA pair, and a selector keeps an outbound SA
// to its family's peer address: without one, an interface's outbound SA
// covers every packet routed into it.
func (s transportSpec) side(local4, peer4, local6, peer6 string, spiOut, spiIn int, keys map[string][]byte) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, `log: {level: debug, format: text}
underlay:
  udp: "0.0.0.0:4500"
  raw_esp: %v
  mark: %s
interfaces:
  - name: ipsec1
    if_id: 1
    mtu: 1400
states:
`, s.raw, underlayMark)
	encap := "\n    encap: {type: espinudp, sport: 4500, dport: 4500}"
	if s.raw {
		encap = ""
	}
	for _, f := range []struct {
		local, peer string
		bits        int
		spiOff      int
	}{{local4, peer4, 32, 0}, {local6, peer6, 128, 1}} {
		out, in := spiOut+f.spiOff, spiIn+f.spiOff
		fmt.Fprintf(&sb, `  - src: "%s"
    dst: "%s"
    spi: 0x%x
    dir: out
    mode: transport
    if_id: 1
    %s%s
    selector: {dst: "%s/%d"}
  - src: "%s"
    dst: "%s"
    spi: 0x%x
    dir: in
    mode: transport
    if_id: 1
    %s%s
    replay_window: 128
`, f.local, f.peer, out, s.suite.yaml(keys[fmt.Sprint(out)]), encap, f.peer, f.bits,
			f.peer, f.local, in, s.suite.yaml(keys[fmt.Sprint(in)]), encap)
	}
	return sb.String()
}

// steerIntoTUN installs the transport-mode routing recipe by hand in ns
// (examples/transport.yaml has the daemon add the routes, with their
// fail-closed guards, through interfaces[].table; TestFailClosedTransport
// runs that form): what the kernel sends to peer (mark 0)
// goes into the interface dev through table 100, while the daemon's own ESP
// (underlayMark) skips the table and leaves by the main table's veth
// route. rp_filter is made loose: strict mode would drop the ESP arriving
// on the veth, as the peer's address now routes into dev.
func steerIntoTUN(t *testing.T, ns *netns, dev, local4, peer4, local6, peer6 string) {
	t.Helper()
	ns.mustRun(t, "sysctl", "-q", "-w", "net.ipv4.conf.all.rp_filter=2")
	for _, fam := range []string{"-4", "-6"} {
		ns.mustRun(t, "ip", fam, "rule", "add", "not", "fwmark", underlayMark, "table", "100")
	}
	ns.mustRun(t, "ip", "route", "add", peer4+"/32", "dev", dev, "src", local4, "table", "100")
	ns.mustRun(t, "ip", "-6", "route", "add", peer6+"/128", "dev", dev, "src", local6, "table", "100")
}

// TestTransport runs two daemons in transport mode between the two
// namespaces' own underlay addresses, IPv4 and IPv6 at once, and checks
// ping and TCP both ways, and that the veth carries only ESP.
func TestTransport(t *testing.T) {
	for _, tt := range []transportSpec{
		{suite: suiteByName("aes-gcm-128"), raw: false},
		{suite: suiteByName("aes-gcm-128"), raw: true},
		{suite: suiteByName("chacha20-poly1305"), raw: false},
		{suite: suiteByName("chacha20-poly1305"), raw: true},
	} {
		t.Run(tt.suite.name+"/"+encapName(tt.raw), func(t *testing.T) {
			p := newPair(t)
			keys := map[string][]byte{}
			for _, spi := range []int{0x1001, 0x1002, 0x2001, 0x2002} {
				keys[fmt.Sprint(spi)] = randomKey(tt.suite.keyLen)
			}
			da := startDaemon(t, p.a, tt.side(underlayA4, underlayB4, underlayA6, underlayB6, 0x1001, 0x2001, keys))
			db := startDaemon(t, p.b, tt.side(underlayB4, underlayA4, underlayB6, underlayA6, 0x2001, 0x1001, keys))
			steerIntoTUN(t, p.a, "ipsec1", underlayA4, underlayB4, underlayA6, underlayB6)
			steerIntoTUN(t, p.b, "ipsec1", underlayB4, underlayA4, underlayB6, underlayA6)

			stop := capture(t, p.a, "veth0")
			ping(t, p.a, underlayB4, 3)
			ping(t, p.b, underlayA4, 3)
			ping(t, p.a, underlayB6, 3)
			ping(t, p.b, underlayA6, 3)
			const n = 1 << 20
			tcpTransfer(t, p.a, p.b, underlayB4, n)
			tcpTransfer(t, p.b, p.a, underlayA4, n)
			tcpTransfer(t, p.a, p.b, underlayB6, n)
			tcpTransfer(t, p.b, p.a, underlayA6, n)
			esp, espBytes, clear := classifyCapture(stop())
			if len(clear) != 0 {
				t.Errorf("veth0 carried %d packets that are not ESP, first: %s", len(clear), clear[0])
			}
			// The capture must have seen the transfers (GSO sends show
			// as one packet of many segments, so count bytes).
			if espBytes < 4*n {
				t.Errorf("veth0 carried %d ESP packets of %d bytes, want at least the %d bytes sent", esp, espBytes, 4*n)
			}
			for _, d := range []*daemon{da, db} {
				st := d.stats()
				for _, c := range []string{"XfrmInError", "XfrmInNoStates", "XfrmInStateProtoError", "XfrmInStateModeError", "XfrmOutError"} {
					if st[c] != 0 {
						t.Errorf("%s: %s = %d, want 0", d.ns.name, c, st[c])
					}
				}
				// The kernel's own router solicitations on the TUN
				// (fe80::... → ff02::2) match no selector: dropped and
				// counted, as they must be.
				if c := st["XfrmOutNoStates"]; c > 3 {
					t.Errorf("%s: XfrmOutNoStates = %d, want at most 3 (router solicitations)", d.ns.name, c)
				}
			}
			// Each family's SA carried traffic (the selectors split them).
			for _, d := range []*daemon{da, db} {
				for _, s := range d.states() {
					if s.Stats.Packets == 0 {
						t.Errorf("%s: SA %s dir %s carried no packets", d.ns.name, s.SPI, s.Dir)
					}
				}
			}
		})
	}
}

// classifyCapture counts the ESP packets (raw or in UDP) in a tcpdump -n
// print and returns the packet lines that are neither ESP nor link
// housekeeping (ARP, IPv6 neighbour discovery and multicast listener
// reports), which must not cross an encrypted underlay.
func classifyCapture(out string) (esp, espBytes int, other []string) {
	for _, line := range strings.Split(out, "\n") {
		if line == "" || strings.HasPrefix(line, "\t") || strings.HasPrefix(line, " ") {
			continue // hex dump of the previous packet
		}
		switch {
		case strings.Contains(line, "ESP("):
			esp++
			if m := captureLength.FindStringSubmatch(line); m != nil {
				n, _ := strconv.Atoi(m[1])
				espBytes += n
			}
		case strings.Contains(line, " ARP,"),
			strings.Contains(line, "neighbor solicitation"), strings.Contains(line, "neighbor advertisement"),
			strings.Contains(line, "router solicitation"), strings.Contains(line, "multicast listener"):
		default:
			other = append(other, line)
		}
	}
	return esp, espBytes, other
}

// captureLength is the length tcpdump prints at the end of a packet's
// line; for a GSO super-packet, that of all its segments.
var captureLength = regexp.MustCompile(`length (\d+)$`)
