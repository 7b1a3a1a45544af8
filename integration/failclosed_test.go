//go:build linux

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/internal/syncbuf"
)

// TestFailClosed checks that what A routes into its interface and may not
// protect is dropped and counted, and never crosses the veth in clear:
// without an outbound SA (XfrmOutNoStates), and with an outbound SA whose
// interface's policy blocks the traffic (XfrmOutPolBlock). Both sides have
// a default route towards the other, and the same holds once A's daemon
// is killed.
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
			defaultRoutes(t, p)
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

			// Once A's daemon is gone, what it dropped (and what it
			// passed) is refused by the guards: nothing of it leaves
			// in clear by the default route either.
			if err := da.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			da.waitExit(t, 5*time.Second)
			stop = capture(t, p.a, "veth0")
			if n := tryToLeak(t, p.a, 2*time.Second); n != 0 {
				t.Errorf("%d pings answered with A's daemon dead, want none", n)
			}
			for _, line := range clearLeaks(stop()) {
				t.Errorf("veth0 carried a packet in clear after the crash: %s", line)
			}
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

// protectedPrefixes are the inner networks of tunnelSpec, as tcpdump -n
// prints their addresses: a packet that names one and is not ESP has
// crossed the veth in clear.
var protectedPrefixes = []string{"198.51.100.", "203.0.113.", "2001:db8:a:", "2001:db8:b:"}

// clearLeaks returns the packet lines of a tcpdump -n print that are not
// ESP and carry an address of the protected prefixes.
func clearLeaks(dump string) []string {
	var leaks []string
	for _, line := range strings.Split(dump, "\n") {
		if line == "" || strings.HasPrefix(line, "\t") || strings.HasPrefix(line, " ") || strings.Contains(line, "ESP(") {
			continue // hex dump of the previous packet, or ESP
		}
		for _, p := range protectedPrefixes {
			if strings.Contains(line, p) {
				leaks = append(leaks, line)
				break
			}
		}
	}
	return leaks
}

// defaultRoutes gives each side a default route towards the other over
// the veth, in both families, as every real host has one: without a
// guard, what a dead daemon's tunnel carried would leave by it in clear.
func defaultRoutes(t *testing.T, p *pair) {
	t.Helper()
	p.a.mustRun(t, "ip", "route", "add", "default", "via", underlayB4)
	p.a.mustRun(t, "ip", "-6", "route", "add", "default", "via", underlayB6)
	p.b.mustRun(t, "ip", "route", "add", "default", "via", underlayA4)
	p.b.mustRun(t, "ip", "-6", "route", "add", "default", "via", underlayA6)
}

// restart starts the daemon again from the same config file, as an
// operator (or systemd) does after a crash or a stop, and returns the new
// process once its control socket answers.
func (d *daemon) restart(t *testing.T) *daemon {
	t.Helper()
	nd := &daemon{t: t, ns: d.ns, cfgPath: d.cfgPath, control: d.control, log: &syncbuf.Buffer{}, done: make(chan error, 1)}
	nd.cmd = exec.Command("ip", "netns", "exec", d.ns.name, ipsecdBin, "run", "--config", d.cfgPath)
	nd.cmd.Stdout, nd.cmd.Stderr = nd.log, nd.log
	if err := nd.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { nd.done <- nd.cmd.Wait() }()
	t.Cleanup(func() {
		nd.stop()
		if t.Failed() {
			t.Logf("ipsecd log in %s (restarted):\n%s", d.ns.name, nd.log.String())
		}
	})
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := nd.ctl("stats"); err == nil {
			return nd
		}
		select {
		case err := <-nd.done:
			nd.done <- err
			t.Fatalf("ipsecd exited during its restart: %v\n%s", err, nd.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarted ipsecd did not answer on %s within 15 s\n%s", nd.control, nd.log.String())
		}
	}
}

// tryToLeak sends what A has for B's protected prefixes for dur: pings of
// both families and new TCP connections, beside whatever streams are
// already running. It returns how many pings were answered.
func tryToLeak(t *testing.T, ns *netns, dur time.Duration) (answered int) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	count := fmt.Sprint(int(dur / (200 * time.Millisecond)))
	for _, dst := range []string{innerB4, innerB6} {
		wg.Go(func() {
			out, _ := ns.run("ping", "-n", "-q", "-c", count, "-i", "0.2", "-w", fmt.Sprint(int(dur.Seconds())+1), dst)
			if m := pingReceived.FindStringSubmatch(out); m != nil {
				n, _ := strconv.Atoi(m[1])
				mu.Lock()
				answered += n
				mu.Unlock()
			}
		})
		wg.Go(func() {
			for end := time.Now().Add(dur); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
				ns.run("timeout", "1", "bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/%s/5201", dst))
			}
		})
	}
	wg.Wait()
	return answered
}

// waitSAPackets waits up to 10 s for the SA of d to have carried more than
// n packets, so that a stream is seen to flow before the test goes on.
func waitSAPackets(t *testing.T, d *daemon, spi int, dir string, n uint64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); d.state(spi, dir).Stats.Packets <= n; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: SA 0x%x %s carried no more than %d packets within 10 s", d.ns.name, spi, dir, n)
		}
	}
}

// TestFailClosedCrash kills A's daemon with SIGKILL while a TCP stream, a
// UDP stream and pings run through the tunnel, both sides having a default
// route towards the other: for 5 s after, nothing to or from the protected
// prefixes may cross the veth other than as ESP. Then A is started again
// from the same file, with no manual cleanup, and ping and TCP work both
// ways.
func TestFailClosedCrash(t *testing.T) {
	// Anti-replay stays on: the restarted A continues its outbound
	// sequence numbers from its state_dir (the same file names the same
	// directory), so B's window takes its packets at once; had A started
	// again at 1, B would refuse them as replays and the pings after the
	// restart would fail.
	spec := tunnelSpec{suite: suiteByName("aes-gcm-128")}
	p := newPair(t)
	defaultRoutes(t, p)
	cfgA, cfgB := spec.configs()
	da := startDaemon(t, p.a, cfgA)
	startDaemon(t, p.b, cfgB)
	ping(t, p.a, innerB4, 2)
	ping(t, p.a, innerB6, 2)

	helpers := []*helperProc{
		startHelperProc(t, p.b, "tcp-sink", true, fmt.Sprintf("%s:%d", innerB4, tcpPort)),
		startHelperProc(t, p.b, "udp-seq-sink", true, fmt.Sprintf("%s:%d", innerB4, udpPortAB)),
	}
	before := da.state(spiAB, "out").Stats.Packets
	helpers = append(helpers,
		startHelperProc(t, p.a, "tcp-paced", false, fmt.Sprintf("%s:%d", innerB4, tcpPort), "2000000", fmt.Sprint(time.Now().UnixNano())),
		startHelperProc(t, p.a, "udp-seq-source", false, fmt.Sprintf("%s:%d", innerB4, udpPortAB), "200", "200"))
	waitSAPackets(t, da, spiAB, "out", before+50)

	stop := capture(t, p.a, "veth0")
	if err := da.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	da.waitExit(t, 5*time.Second)
	if out, err := p.a.run("ip", "link", "show", "ipsec1"); err == nil {
		t.Fatalf("ipsec1 is still there after SIGKILL:\n%s", out)
	}
	answered := tryToLeak(t, p.a, 5*time.Second)
	dump := stop()
	for _, line := range clearLeaks(dump) {
		t.Errorf("veth0 carried a packet in clear after the crash: %s", line)
	}
	if answered != 0 {
		t.Errorf("%d pings answered with A's daemon dead, want none", answered)
	}
	t.Logf("A's guards after the crash:\n%s", p.a.mustRun(t, "ip", "route", "show", "table", "all", "proto", "90"))
	for _, h := range helpers {
		h.cmd.Process.Kill() // the streams are broken; free their ports
	}

	// The same file, no cleanup: the restart adopts the guards.
	da = da.restart(t)
	if log := da.waitLog(t, "fail-closed guards"); !strings.Contains(log, "adopted") {
		t.Errorf("the restarted daemon does not say it adopted the guards:\n%s", log)
	}
	ping(t, p.a, innerB4, 3)
	ping(t, p.b, innerA4, 3)
	ping(t, p.a, innerB6, 3)
	ping(t, p.b, innerA6, 3)
	tcpTransfer(t, p.a, p.b, innerB4, 1<<20)
	tcpTransfer(t, p.b, p.a, innerA6, 1<<20)
}

// guardsIn lists the fail-closed guards in ns, both families and every
// table, as "PREFIX" or "PREFIX table N", sorted.
func guardsIn(t *testing.T, ns *netns) []string {
	t.Helper()
	var out []string
	for _, fam := range []string{"-4", "-6"} {
		for _, line := range strings.Split(ns.mustRun(t, "ip", fam, "route", "show", "table", "all", "proto", "90"), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			if f[0] != "unreachable" || !strings.Contains(line, "metric 4294967295") {
				t.Errorf("a route of proto 90 that is not a guard: %s", line)
				continue
			}
			g := f[1]
			if i := slices.Index(f, "table"); i > 0 && i+1 < len(f) {
				g += " table " + f[i+1]
			}
			out = append(out, g)
		}
	}
	slices.Sort(out)
	return out
}

// kernelState is what `ip` shows of a namespace's links, addresses,
// routes (every table) and rules, both families, one line each.
func kernelState(t *testing.T, ns *netns) []string {
	t.Helper()
	var lines []string
	for _, args := range [][]string{
		{"-o", "link"}, {"-o", "addr"},
		{"-4", "route", "show", "table", "all"}, {"-6", "route", "show", "table", "all"},
		{"-4", "rule"}, {"-6", "rule"},
	} {
		for _, l := range strings.Split(ns.mustRun(t, "ip", args...), "\n") {
			// IPv6 link-local addresses and their local routes are
			// the kernel's, made for every link that comes up (the
			// veth's may appear only after the snapshot before the
			// start); a device of ours left behind shows in the link
			// list anyway.
			if l = strings.TrimSpace(l); l != "" && !strings.Contains(l, "fe80::") {
				lines = append(lines, l)
			}
		}
	}
	return lines
}

// added returns the lines of after that are not in before.
func added(before, after []string) []string {
	var out []string
	for _, l := range after {
		if !slices.Contains(before, l) {
			out = append(out, l)
		}
	}
	return out
}

// TestFailClosedStop stops A with SIGTERM: by default nothing of the
// daemon is left in the kernel (no device, route, guard or rule that was
// not there before it started); with fail_closed.keep_on_stop the guards
// stay, keep A's traffic for B's prefixes off the veth, and the next start
// adopts them.
func TestFailClosedStop(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep_on_stop=%v", keep), func(t *testing.T) {
			spec := tunnelSpec{suite: suiteByName("aes-gcm-128")}
			if keep {
				spec.extraA = "fail_closed: {keep_on_stop: true}\n"
			}
			p := newPair(t)
			defaultRoutes(t, p)
			before := kernelState(t, p.a)
			cfgA, cfgB := spec.configs()
			da := startDaemon(t, p.a, cfgA)
			startDaemon(t, p.b, cfgB)
			ping(t, p.a, innerB4, 2)
			ping(t, p.a, innerB6, 2)
			want := []string{"198.51.100.0/24", "2001:db8:a::/64", "2001:db8:b::/64", "203.0.113.0/24"}
			if got := guardsIn(t, p.a); !slices.Equal(got, want) {
				t.Errorf("guards while running: %q, want %q", got, want)
			}

			if err := da.stop(); err != nil {
				t.Fatalf("SIGTERM: %v", err)
			}
			left := added(before, kernelState(t, p.a))
			if !keep {
				for _, l := range left {
					t.Errorf("left in the kernel after SIGTERM: %s", l)
				}
				return
			}
			if got := guardsIn(t, p.a); !slices.Equal(got, want) {
				t.Errorf("guards after SIGTERM with keep_on_stop: %q, want %q", got, want)
			}
			if len(left) != len(want) {
				t.Errorf("left in the kernel after SIGTERM: %q, want only the %d guards", left, len(want))
			}
			stop := capture(t, p.a, "veth0")
			answered := tryToLeak(t, p.a, 2*time.Second)
			for _, line := range clearLeaks(stop()) {
				t.Errorf("veth0 carried a packet in clear after the stop: %s", line)
			}
			if answered != 0 {
				t.Errorf("%d pings answered with A's daemon stopped, want none", answered)
			}
			da = da.restart(t)
			if log := da.waitLog(t, "fail-closed guards"); !strings.Contains(log, "adopted 4") {
				t.Errorf("the restarted daemon does not say it adopted the 4 guards:\n%s", log)
			}
			ping(t, p.a, innerB4, 3)
			ping(t, p.b, innerA6, 3)
		})
	}
}

// TestFailClosedReload checks that guards follow reloads: a reload that
// drops an interface or a route leaves no guard of it behind, one that adds
// a route or an interface adds its guard, and a refused reload changes
// none. A restart after a crash with a file changed meanwhile removes the
// guards of what the file no longer routes, and says so.
func TestFailClosedReload(t *testing.T) {
	ns := newNetns(t)
	const base = `log: {level: debug, format: text}
underlay: {udp: "127.0.0.1:4500"}
interfaces:
  - {name: ipsec1, if_id: 1, addresses: [198.51.100.1/24, "2001:db8:a::1/64"], routes: [%s]}
%s`
	const ipsec2 = `  - {name: ipsec2, if_id: 2, addresses: [100.64.1.1/24], routes: [100.64.2.0/24]}
`
	d := startDaemon(t, ns, fmt.Sprintf(base, `203.0.113.0/24, "2001:db8:b::/64"`, ipsec2))
	check := func(when string, want ...string) {
		t.Helper()
		slices.Sort(want)
		if got := guardsIn(t, ns); !slices.Equal(got, want) {
			t.Errorf("guards %s: %q, want %q", when, got, want)
		}
	}
	check("at start", "100.64.1.0/24", "100.64.2.0/24", "198.51.100.0/24", "2001:db8:a::/64", "2001:db8:b::/64", "203.0.113.0/24")

	reloads := 0
	reload := func(cfg, want string) {
		t.Helper()
		d.reload(t, cfg)
		reloads++
		for deadline := time.Now().Add(10 * time.Second); strings.Count(d.log.String(), want) < reloads; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the log within 10 s:\n%s", want, d.log.String())
			}
		}
	}
	// ipsec2 goes, ipsec1 loses its IPv6 route and gains 100.64.9.0/24.
	reload(fmt.Sprintf(base, `203.0.113.0/24, 100.64.9.0/24`, ""), "reloaded:")
	check("after dropping ipsec2 and a route and adding a route", "100.64.9.0/24", "198.51.100.0/24", "2001:db8:a::/64", "203.0.113.0/24")
	if out := ns.mustRun(t, "ip", "route", "show", "100.64.9.0/24"); !strings.Contains(out, "dev ipsec1") {
		t.Errorf("route 100.64.9.0/24 after the reload: %q, want dev ipsec1", out)
	}

	// A broken file changes nothing.
	reloads = strings.Count(d.log.String(), "reload refused")
	reload(fmt.Sprintf(base, `203.0.113.0/24, 100.64.9.0/33`, ipsec2), "reload refused")
	check("after a refused reload", "100.64.9.0/24", "198.51.100.0/24", "2001:db8:a::/64", "203.0.113.0/24")

	// ipsec2 comes back.
	reloads = strings.Count(d.log.String(), "reloaded:")
	reload(fmt.Sprintf(base, `203.0.113.0/24, 100.64.9.0/24`, ipsec2), "reloaded:")
	check("after adding ipsec2 back", "100.64.1.0/24", "100.64.2.0/24", "100.64.9.0/24", "198.51.100.0/24", "2001:db8:a::/64", "203.0.113.0/24")

	// A crash, and a file without ipsec2 meanwhile: the restart keeps
	// the guards the file wants and removes ipsec2's.
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	d.waitExit(t, 5*time.Second)
	if err := os.WriteFile(d.cfgPath, []byte("control: "+d.control+"\n"+fmt.Sprintf(base, `203.0.113.0/24`, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	// check tells beforehand what the start will clean.
	out := ns.mustRun(t, ipsecdBin, "check", "--config", d.cfgPath)
	for _, want := range []string{
		"fail-closed guards in this network namespace: 6; a start with this file keeps 3 and removes 3",
		"keeps: 198.51.100.0/24, 203.0.113.0/24, 2001:db8:a::/64",
		"removes: 100.64.1.0/24, 100.64.2.0/24, 100.64.9.0/24",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("ipsecd check says nothing of %q:\n%s", want, out)
		}
	}
	d = d.restart(t)
	log := d.waitLog(t, "fail-closed guards in place")
	for _, want := range []string{
		`fail-closed guards left by a previous run: adopted 3" guards="198.51.100.0/24, 203.0.113.0/24, 2001:db8:a::/64"`,
		`fail-closed guards left by a previous run: removed 3 that the config no longer routes" guards="100.64.1.0/24, 100.64.2.0/24, 100.64.9.0/24"`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the restart's log has no %s:\n%s", want, log)
		}
	}
	check("after the restart", "198.51.100.0/24", "2001:db8:a::/64", "203.0.113.0/24")
}

// TestFailClosedTransport runs transport mode with the peer's addresses
// routed into ipsec1 by the daemon itself, in table 100 (interfaces[].table),
// which the recipe's rule sends every unmarked packet through. After a
// SIGKILL of A the guards in table 100 keep A's traffic for B off the veth
// (the marked ESP of a running daemon skips the table); the restart adopts
// them, and ping and TCP work again.
func TestFailClosedTransport(t *testing.T) {
	spec := transportSpec{suite: suiteByName("aes-gcm-128")}
	p := newPair(t)
	keys := map[string][]byte{}
	for _, spi := range []int{0x1001, 0x1002, 0x2001, 0x2002} {
		keys[fmt.Sprint(spi)] = randomKey(spec.suite.keyLen)
	}
	side := func(local4, peer4, local6, peer6 string, spiOut, spiIn int) string {
		cfg := spec.side(local4, peer4, local6, peer6, spiOut, spiIn, keys)
		// The restarted A starts its sequence numbers again at 1.
		cfg = strings.ReplaceAll(cfg, "replay_window: 128", "replay_window: 0")
		return strings.Replace(cfg, "    mtu: 1400\n", fmt.Sprintf("    mtu: 1400\n    table: 100\n    routes: [\"%s/32\", \"%s/128\"]\n", peer4, peer6), 1)
	}
	for _, ns := range []*netns{p.a, p.b} {
		ns.mustRun(t, "sysctl", "-q", "-w", "net.ipv4.conf.all.rp_filter=2")
		for _, fam := range []string{"-4", "-6"} {
			ns.mustRun(t, "ip", fam, "rule", "add", "not", "fwmark", underlayMark, "table", "100")
		}
	}
	da := startDaemon(t, p.a, side(underlayA4, underlayB4, underlayA6, underlayB6, 0x1001, 0x2001))
	startDaemon(t, p.b, side(underlayB4, underlayA4, underlayB6, underlayA6, 0x2001, 0x1001))
	want := []string{"192.0.2.2 table 100", "2001:db8:ff::2 table 100"} // as ip prints host routes
	if got := guardsIn(t, p.a); !slices.Equal(got, want) {
		t.Errorf("A's guards: %q, want %q", got, want)
	}
	ping(t, p.a, underlayB4, 2)
	ping(t, p.a, underlayB6, 2)

	stop := capture(t, p.a, "veth0")
	if err := da.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	da.waitExit(t, 5*time.Second)
	answered := 0
	for _, dst := range []string{underlayB4, underlayB6} {
		out, _ := p.a.run("ping", "-n", "-q", "-c", "10", "-i", "0.2", "-w", "3", dst)
		if m := pingReceived.FindStringSubmatch(out); m != nil {
			n, _ := strconv.Atoi(m[1])
			answered += n
		}
		p.a.run("timeout", "1", "bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/%s/5201", dst))
	}
	_, _, other := classifyCapture(stop())
	for _, line := range other {
		t.Errorf("veth0 carried a packet in clear after the crash: %s", line)
	}
	if answered != 0 {
		t.Errorf("%d pings answered with A's daemon dead, want none", answered)
	}

	da = da.restart(t)
	if log := da.waitLog(t, "fail-closed guards in place"); !strings.Contains(log, "adopted 2") {
		t.Errorf("the restarted daemon does not say it adopted the 2 guards:\n%s", log)
	}
	ping(t, p.a, underlayB4, 3)
	ping(t, p.b, underlayA6, 3)
	tcpTransfer(t, p.a, p.b, underlayB4, 1<<20)
	tcpTransfer(t, p.b, p.a, underlayA6, 1<<20)
}
