//go:build linux

package integration

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// How TestRotation paces its rotations and traffic.
const (
	rotations = 10
	// rotationPeriod is from the start of one rotation to the start of
	// the next; a rotation that takes longer on a loaded machine is
	// followed at once by the next.
	rotationPeriod = 2500 * time.Millisecond
	// rotationGrace is how long the old SA pair stays after both sides
	// switched to the new outbound SAs: ample for what was in flight.
	rotationGrace = 1200 * time.Millisecond
	// rotationSettle is the part of the grace after which nothing may
	// arrive on the old inbound SAs any more.
	rotationSettle = 500 * time.Millisecond

	udpRate = 1000 // datagrams per second, each way
	udpSize = 512  // bytes of UDP payload
	// tcpBitrate caps the TCP stream. Unpaced, TCP fills the TUN queues
	// and the underlay socket buffers of a loaded 2-core machine, and
	// the kernel then drops datagrams of the UDP stream for congestion
	// that has nothing to do with rekeying. At 30 Mbit/s, a small part
	// of what the tunnel carries here, a lost datagram is the
	// rotation's fault.
	tcpBitrate = 30_000_000
)

// TestRotation rekeys a running pair ten times while a TCP stream and a
// 1,000 datagram/s UDP stream each way run through the tunnel, and checks
// that nothing is lost: every datagram arrives once and in order, the TCP
// stream is neither reset nor corrupted, no packet meets a missing SA or
// fails its replay or integrity check, each new SA carries the traffic,
// and the old ones are gone. Two ways to rotate, as an operator would:
// over the control socket, and by editing the config file and sending
// SIGHUP. Each way then tries a new key under a running SPI, which cannot
// be make-before-break, and checks that it is refused and changes
// nothing; SIGHUP also may not bring back a removed SA with its old key.
func TestRotation(t *testing.T) {
	t.Run("control", func(t *testing.T) {
		rig := testRotation(t, (*rotationRig).rotateByControl)
		if !t.Failed() {
			rig.checkControlSameSPIRefused(t)
		}
	})
	t.Run("sighup", func(t *testing.T) {
		rig := testRotation(t, (*rotationRig).rotateBySIGHUP)
		if !t.Failed() {
			rig.checkSameSPIRekeyRefused(t)
			rig.checkKeyReuseRefused(t)
		}
	})
}

// saPair is one generation of the SAs between A and B: SPI ab (A's out,
// B's in) and ba (B's out, A's in), with their keys (AES-GCM-128).
type saPair struct {
	ab, ba   int
	kAB, kBA []byte
}

func newSAPair(gen int) saPair {
	return saPair{ab: spiAB + gen<<4, ba: spiBA + gen<<4, kAB: randomKey(20), kBA: randomKey(20)}
}

// rotationRig is a running pair of daemons and the SAs they use.
type rotationRig struct {
	p      *pair
	da, db *daemon
	first  saPair // the SAs the daemons started with
	cur    saPair
}

// testRotation starts the pair and the streams, rotates, stops the
// streams and checks what they and the daemons saw.
func testRotation(t *testing.T, rotate func(rig *rotationRig, t *testing.T, next saPair)) *rotationRig {
	rig := &rotationRig{p: newPair(t), cur: newSAPair(0)}
	rig.first = rig.cur
	rig.da = startDaemon(t, rig.p.a, rotationConfig(true, rig.cur, rig.cur))
	rig.db = startDaemon(t, rig.p.b, rotationConfig(false, rig.cur, rig.cur))
	// A TUN queue holds txqueuelen packets (500) for the daemon to read,
	// and the kernel drops what does not fit (the link's TX dropped):
	// half a second of these streams. On a loaded 2-core machine a
	// process can be off the CPU that long (seen: a helper 922 ms late
	// on its schedule, and 123 datagrams lost), which says nothing about
	// rekeying. 4096 rode out a 1.5 s SIGSTOP of a daemon with no loss;
	// 500 lost 1,024 datagrams.
	for _, ns := range []*netns{rig.p.a, rig.p.b} {
		ns.mustRun(t, "ip", "link", "set", "ipsec1", "txqueuelen", "4096")
	}
	ping(t, rig.p.a, innerB4, 2)
	ping(t, rig.p.b, innerA4, 2)

	st := startStreams(t, rig.p)
	time.Sleep(2 * time.Second) // the streams reach their pace
	start := time.Now()
	done := 0
	for done < rotations && !t.Failed() {
		began := time.Now()
		next := newSAPair(done + 1)
		rotate(rig, t, next)
		rig.cur = next
		done++
		time.Sleep(time.Until(began.Add(rotationPeriod)))
	}
	t.Logf("%d rotations in %v", done, time.Since(start).Round(time.Millisecond))
	time.Sleep(time.Second) // traffic on the last SAs only
	st.stopAndCheck(t, done == rotations)
	if t.Failed() {
		for _, d := range []*daemon{rig.da, rig.db} {
			t.Logf("where packets may have gone, in %s:\n%s", d.ns.name, dropCounters(d))
		}
	}

	for _, d := range []*daemon{rig.da, rig.db} {
		c := d.stats()
		t.Logf("%s: XfrmInNoStates %d, XfrmInStateSeqError %d, XfrmInStateProtoError %d, XfrmOutNoStates %d, XfrmInError %d, XfrmOutError %d",
			d.ns.name, c["XfrmInNoStates"], c["XfrmInStateSeqError"], c["XfrmInStateProtoError"], c["XfrmOutNoStates"], c["XfrmInError"], c["XfrmOutError"])
		for _, name := range []string{"XfrmInNoStates", "XfrmInStateSeqError", "XfrmInStateProtoError", "XfrmInError", "XfrmOutNoStates", "XfrmOutError"} {
			if _, ok := c[name]; !ok {
				t.Errorf("%s: ipsecd stats has no %s", d.ns.name, name)
			} else if c[name] != 0 {
				t.Errorf("%s: %s = %d, want 0", d.ns.name, name, c[name])
			}
		}
	}
	if t.Failed() {
		return rig
	}
	// Only the last pair is left, and it carries the traffic.
	for _, side := range []struct {
		d       *daemon
		out, in int
	}{{rig.da, rig.cur.ab, rig.cur.ba}, {rig.db, rig.cur.ba, rig.cur.ab}} {
		var got []string
		for _, s := range side.d.states() {
			got = append(got, s.SPI+" "+s.Dir)
			if s.Stats.Packets == 0 {
				t.Errorf("%s: SA %s dir %s carried no packets", side.d.ns.name, s.SPI, s.Dir)
			}
		}
		want := []string{fmt.Sprintf("%#x in", side.in), fmt.Sprintf("%#x out", side.out)}
		if strings.Join(got, ", ") != strings.Join(want, ", ") {
			t.Errorf("%s: SAs after the rotations: %v, want %v", side.d.ns.name, got, want)
		}
	}
	return rig
}

// rotateByControl rotates over the control socket: the new inbound SAs
// on both sides, then the new outbound SAs (the newest SA of an interface
// seals), and after a grace period the old pair goes.
func (rig *rotationRig) rotateByControl(t *testing.T, next saPair) {
	da, db, cur := rig.da, rig.db, rig.cur
	db.addState(t, underlayA4, underlayB4, next.ab, "in", next.kAB)
	da.addState(t, underlayB4, underlayA4, next.ba, "in", next.kBA)
	da.addState(t, underlayA4, underlayB4, next.ab, "out", next.kAB)
	db.addState(t, underlayB4, underlayA4, next.ba, "out", next.kBA)
	rig.checkSwitched(t, next, time.Now())
	// The old outbound SAs sealed nothing since the switch, and every
	// packet they sealed was opened by the peer's old inbound SA.
	for _, side := range []struct {
		from, to *daemon
		spi      int
	}{{da, db, cur.ab}, {db, da, cur.ba}} {
		sealed, opened := side.from.state(side.spi, "out").Stats, side.to.state(side.spi, "in").Stats
		if sealed.Packets != opened.Packets || sealed.Seq != opened.Seq {
			t.Errorf("old SA 0x%x: %s sealed %d packets (seq %d), %s opened %d (top %d): want all opened",
				side.spi, side.from.ns.name, sealed.Packets, sealed.Seq, side.to.ns.name, opened.Packets, opened.Seq)
		}
	}
	da.deleteState(t, cur.ab, underlayB4, "out")
	db.deleteState(t, cur.ba, underlayA4, "out")
	db.deleteState(t, cur.ab, underlayB4, "in")
	da.deleteState(t, cur.ba, underlayA4, "in")
}

// rotateBySIGHUP rotates by editing each side's config file in three
// steps, each applied with SIGHUP and awaited in `state list`: (1) add
// the new inbound SA, (2) replace the outbound SA by the new one, (3)
// after a grace period, remove the old inbound SA.
func (rig *rotationRig) rotateBySIGHUP(t *testing.T, next saPair) {
	da, db, cur := rig.da, rig.db, rig.cur
	reloadBoth := func(out saPair, ins ...saPair) {
		db.reload(t, rotationConfig(false, out, ins...))
		da.reload(t, rotationConfig(true, out, ins...))
	}
	reloadBoth(cur, cur, next)
	rig.waitStates(t, "step 1, new in SAs", map[string]bool{
		sk(da, next.ba, "in"): true, sk(db, next.ab, "in"): true})
	reloadBoth(next, cur, next)
	rig.waitStates(t, "step 2, out SAs replaced", map[string]bool{
		sk(da, next.ab, "out"): true, sk(db, next.ba, "out"): true,
		sk(da, cur.ab, "out"): false, sk(db, cur.ba, "out"): false})
	rig.checkSwitched(t, next, time.Now())
	reloadBoth(next, next)
	rig.waitStates(t, "step 3, old in SAs removed", map[string]bool{
		sk(da, cur.ba, "in"): false, sk(db, cur.ab, "in"): false})
}

// sk names an SA of a daemon for waitStates.
func sk(d *daemon, spi int, dir string) string {
	return fmt.Sprintf("%s %#x %s", d.ns.name, spi, dir)
}

// waitStates waits up to 10 s until each SA of want is present (true) or
// absent (false) in its daemon's `state list`.
func (rig *rotationRig) waitStates(t *testing.T, what string, want map[string]bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		have := map[string]bool{}
		for _, d := range []*daemon{rig.da, rig.db} {
			for _, s := range d.states() {
				have[d.ns.name+" "+s.SPI+" "+s.Dir] = true
			}
		}
		var wrong []string
		for k, v := range want {
			if have[k] != v {
				wrong = append(wrong, fmt.Sprintf("%s present=%v", k, have[k]))
			}
		}
		if len(wrong) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not applied within 10 s of SIGHUP, want %v", what, wrong)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkSwitched waits out the grace period that began when both sides
// had their new outbound SAs, and checks that the switch is complete:
// nothing arrives on the old inbound SAs once what was in flight has
// landed, and the new inbound SAs open the traffic.
func (rig *rotationRig) checkSwitched(t *testing.T, next saPair, switched time.Time) {
	t.Helper()
	oldIn := []struct {
		d   *daemon
		spi int
	}{{rig.da, rig.cur.ba}, {rig.db, rig.cur.ab}}
	time.Sleep(time.Until(switched.Add(rotationSettle)))
	var before [2]uint64
	for i, o := range oldIn {
		before[i] = o.d.state(o.spi, "in").Stats.Packets
	}
	time.Sleep(time.Until(switched.Add(rotationGrace)))
	for i, o := range oldIn {
		if after := o.d.state(o.spi, "in").Stats.Packets; after != before[i] {
			t.Errorf("%s: old in SA 0x%x opened %d packets between %v and %v after the switch, want 0: the peer still seals with the old SA",
				o.d.ns.name, o.spi, after-before[i], rotationSettle, rotationGrace)
		}
	}
	for _, n := range []struct {
		d   *daemon
		spi int
	}{{rig.da, next.ba}, {rig.db, next.ab}} {
		if got := n.d.state(n.spi, "in").Stats.Packets; got == 0 {
			t.Errorf("%s: new in SA 0x%x opened no packet within %v of the switch", n.d.ns.name, n.spi, rotationGrace)
		}
	}
}

// checkSameSPIRekeyRefused checks what a SIGHUP does with a file that
// gives a running SA a new key under the same SPI: such a rekey cannot be
// make-before-break (the peer would drop what is in flight, and the
// sequence number would start again), so the file is refused, naming the
// state and telling the operator to use a new SPI, and the SA keeps
// running with its key and sequence number.
//
// It is part of the sighup subtest, not a subtest of its own: the
// daemons' helpers fail the test that started them.
func (rig *rotationRig) checkSameSPIRekeyRefused(t *testing.T) {
	da, db := rig.da, rig.db
	seq0 := da.state(rig.cur.ab, "out").Stats.Seq
	rekeyed := rig.cur
	rekeyed.kAB = randomKey(20)
	cfg := rotationConfig(true, rekeyed, rig.cur)
	log := da.reloadRefused(t, cfg)
	// states[0] is A's out SA; the file starts with the control line.
	want := fmt.Sprintf("%s:%d: states[0].aead.key: ", da.cfgPath, lineOf(cfg, "- src:")+1)
	if !strings.Contains(log, want) || !strings.Contains(log, "new SPI") {
		t.Errorf("refusal does not name the file, line and field %q and ask for a new SPI:\n%s", want, log)
	}
	if strings.Contains(log, hexKey(rekeyed.kAB)[2:]) {
		t.Errorf("the log holds the new key:\n%s", log)
	}
	// The old key keeps sealing: B still opens A's packets.
	ping(t, rig.p.a, innerB4, 3)
	if seq := da.state(rig.cur.ab, "out").Stats.Seq; seq < seq0+3 {
		t.Errorf("A's out SA seq %d after 3 pings, want at least %d: the running SA must stay", seq, seq0+3)
	}
	if n := db.stats()["XfrmInStateProtoError"]; n != 0 {
		t.Errorf("B: XfrmInStateProtoError = %d after the refused rekey, want 0", n)
	}
	t.Logf("SIGHUP with a new key under the running SPI 0x%x: refused, the SA kept sealing", rig.cur.ab)
}

// reloadRefused reloads the daemon with cfg, waits up to 10 s for the
// daemon to refuse it, and returns the log.
func (d *daemon) reloadRefused(t *testing.T, cfg string) string {
	t.Helper()
	refusals := strings.Count(d.log.String(), "reload refused")
	d.reload(t, cfg)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		log := d.log.String()
		if strings.Count(log, "reload refused") > refusals {
			return log
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: reload not refused within 10 s:\n%s\nlog:\n%s", d.ns.name, cfg, log)
		}
	}
}

// checkKeyReuseRefused checks that a SIGHUP may not bring back a removed
// SA with its old key: its sequence numbers, which AES-GCM takes as
// nonces, would start again at 1.
func (rig *rotationRig) checkKeyReuseRefused(t *testing.T) {
	da := rig.da
	cfg := rotationConfig(true, rig.first, rig.cur)
	log := da.reloadRefused(t, cfg)
	want := fmt.Sprintf("%s:%d: states[0].aead.key: ", da.cfgPath, lineOf(cfg, "- src:")+1)
	if !strings.Contains(log, want) || !strings.Contains(log, fmt.Sprintf("%#x", rig.first.ab)) || !strings.Contains(log, "new key") {
		t.Errorf("refusal does not name %q and SPI 0x%x and ask for a new key:\n%s", want, rig.first.ab, log)
	}
	ping(t, rig.p.a, innerB4, 2)
	for _, s := range da.states() {
		if v, _ := strconv.ParseUint(s.SPI, 0, 32); int(v) == rig.first.ab {
			t.Errorf("SA 0x%x is back after a refused reload", rig.first.ab)
		}
	}
	t.Logf("SIGHUP bringing back SPI 0x%x with its old key: refused", rig.first.ab)
}

// checkControlSameSPIRefused checks that `state add` of an SA whose
// direction, SPI and destination are in use, with a new key, is refused
// (ErrExists) and changes nothing: the control socket does not rekey in
// place either.
func (rig *rotationRig) checkControlSameSPIRefused(t *testing.T) {
	da, db := rig.da, rig.db
	seq0 := db.state(rig.cur.ab, "in").Stats.Seq
	out, err := db.ctl("state", "add", "--src", underlayA4, "--dst", underlayB4, "--spi", fmt.Sprintf("0x%x", rig.cur.ab), "--dir", "in",
		"--mode", "tunnel", "--if-id", "1", "--aead", "rfc4106(gcm(aes))", "--key", hexKey(randomKey(20)),
		"--encap", "espinudp:4500:4500", "--replay-window", "1024")
	if err == nil || !strings.Contains(out, "exists") {
		t.Errorf("state add of the running SPI 0x%x with a new key: err %v, want it refused as existing:\n%s", rig.cur.ab, err, out)
	}
	ping(t, rig.p.a, innerB4, 3)
	if seq := db.state(rig.cur.ab, "in").Stats.Seq; seq < seq0+3 {
		t.Errorf("B's in SA 0x%x top %d after 3 pings, want at least %d: the running SA must stay", rig.cur.ab, seq, seq0+3)
	}
	for _, d := range []*daemon{da, db} {
		if n := d.stats()["XfrmInStateProtoError"]; n != 0 {
			t.Errorf("%s: XfrmInStateProtoError = %d after the refused add, want 0", d.ns.name, n)
		}
	}
	t.Logf("state add of the running SPI 0x%x: %s", rig.cur.ab, strings.TrimSpace(out))
}

// dropCounters returns what a namespace and its daemon counted as
// dropped: the links (a TUN's TX drops are its full ring), the kernel's
// IP and UDP drops, and the daemon's interfaces and global counters.
func dropCounters(d *daemon) string {
	var sb strings.Builder
	for _, c := range [][]string{{"ip", "-s", "link"}, {"nstat", "-asz"}} {
		out, err := d.ns.run(c[0], c[1:]...)
		if c[0] == "nstat" {
			var keep []string
			for _, line := range strings.Split(out, "\n") {
				if f := strings.Fields(line); len(f) >= 2 && f[1] != "0" && dropCounterName.MatchString(f[0]) {
					keep = append(keep, line)
				}
			}
			out = strings.Join(keep, "\n") + "\n"
		}
		fmt.Fprintf(&sb, "$ %s (%v)\n%s", strings.Join(c, " "), err, out)
	}
	for _, c := range [][]string{{"interface", "list"}, {"stats"}} {
		out, err := d.ctl(c...)
		fmt.Fprintf(&sb, "$ ipsecd %s (%v)\n%s", strings.Join(c, " "), err, out)
	}
	if b, err := os.ReadFile("/proc/net/softnet_stat"); err == nil {
		fmt.Fprintf(&sb, "$ cat /proc/net/softnet_stat (column 2: backlog drops, all namespaces)\n%s", b)
	}
	return sb.String()
}

var dropCounterName = regexp.MustCompile(`Err|Drop|Discard|Overflow|Fail|Prune`)

// rotationConfig is the config of side A (a) or B with the outbound SA of
// out and the inbound SAs of ins: ESP in UDP over the IPv4 underlay,
// AES-GCM-128, two queues.
func rotationConfig(a bool, out saPair, ins ...saPair) string {
	local, peer, addr, route := underlayA4, underlayB4, innerA4, prefix24(innerB4)
	if !a {
		local, peer, addr, route = underlayB4, underlayA4, innerB4, prefix24(innerA4)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, `log: {level: info, format: text}
underlay: {udp: "0.0.0.0:4500"}
interfaces:
  - {name: ipsec1, if_id: 1, mtu: 1400, queues: 2, addresses: [%s/24], routes: [%s/24]}
states:
`, addr, route)
	state := func(src, dst string, spi int, dir string, key []byte) {
		fmt.Fprintf(&sb, `  - src: "%s"
    dst: "%s"
    spi: 0x%x
    dir: %s
    mode: tunnel
    if_id: 1
    aead: {name: "rfc4106(gcm(aes))", key: "%s", icv_bits: 128}
    encap: {type: espinudp, sport: 4500, dport: 4500}
    replay_window: 1024
`, src, dst, spi, dir, hexKey(key))
	}
	if a {
		state(local, peer, out.ab, "out", out.kAB)
	} else {
		state(local, peer, out.ba, "out", out.kBA)
	}
	for _, in := range ins {
		if a {
			state(peer, local, in.ba, "in", in.kBA)
		} else {
			state(peer, local, in.ab, "in", in.kAB)
		}
	}
	return sb.String()
}
