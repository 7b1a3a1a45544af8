//go:build linux

package integration

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/internal/promtest"
	"github.com/ipsecd/ipsecd/internal/syncbuf"
)

// withLifetime gives the state of cfg with spi and dir a lifetime line.
func withLifetime(t *testing.T, cfg string, spi int, dir, lifetime string) string {
	t.Helper()
	anchor := fmt.Sprintf("    spi: 0x%x\n    dir: %s\n", spi, dir)
	if strings.Count(cfg, anchor) != 1 {
		t.Fatalf("config has %d states spi 0x%x dir %s, want 1", strings.Count(cfg, anchor), spi, dir)
	}
	return strings.Replace(cfg, anchor, anchor+"    lifetime: "+lifetime+"\n", 1)
}

// eventLine returns the first log line of an SA lifetime event with all
// of fields (key=value as logrus's text format writes them), or "".
func eventLine(log, msg string, fields ...string) string {
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, `msg="`+msg+`"`) {
			continue
		}
		ok := true
		for _, f := range fields {
			if !strings.Contains(line, " "+f) {
				ok = false
				break
			}
		}
		if ok {
			return line
		}
	}
	return ""
}

// waitEvent waits up to timeout for eventLine to find a line, and fails
// the test otherwise.
func (d *daemon) waitEvent(t *testing.T, timeout time.Duration, msg string, fields ...string) string {
	t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(50 * time.Millisecond) {
		if line := eventLine(d.log.String(), msg, fields...); line != "" {
			return line
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no log line %q with %q within %v:\n%s", d.ns.name, msg, fields, timeout, d.log.String())
		}
	}
}

// saFields are the fields an event line names an SA with.
func saFields(spi int, dir, src, dst string) []string {
	return []string{"spi=" + control.FormatSPI(uint32(spi)), "dir=" + dir, "src=" + src, "dst=" + dst, "if_id=1"}
}

// hasState reports whether the daemon has the SA spi/dir.
func (d *daemon) hasState(spi int, dir string) bool {
	_, ok := d.saStats()[stateKey(dir, uint32(spi))]
	return ok
}

// waitGone waits up to timeout for the SA to leave `state list`.
func (d *daemon) waitGone(t *testing.T, spi int, dir string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for d.hasState(spi, dir) {
		if time.Since(start) > timeout {
			t.Fatalf("%s: SA spi 0x%x dir %s still in state list %v after its hard expiry:\n%s",
				d.ns.name, spi, dir, timeout, d.mustCtl(t, "state", "list"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}

// stanza returns the `state list` text of the SA spi/dir.
func stanza(list string, spi int, dir string) string {
	want := fmt.Sprintf("spi %s dir %s ", control.FormatSPI(uint32(spi)), dir)
	blocks := strings.Split(list, "src ")
	for _, b := range blocks {
		if strings.Contains(b, want) {
			return "src " + b
		}
	}
	return ""
}

// saExpiredMetric returns ipsecd_sa_expired for an SA and kind, and
// whether the scrape has the metric family at all.
func saExpiredMetric(t *testing.T, body string, spi int, dir, kind string) (v float64, found, family bool) {
	t.Helper()
	if !strings.Contains(body, "ipsecd_sa_expired") {
		return 0, false, false
	}
	samples, _ := promtest.Samples(t, body)
	for k, val := range samples {
		if strings.HasPrefix(k, "ipsecd_sa_expired{") && strings.Contains(k, fmt.Sprintf(`spi="%#x"`, spi)) &&
			strings.Contains(k, `dir="`+dir+`"`) && strings.Contains(k, `kind="`+kind+`"`) {
			return val, true, true
		}
	}
	return 0, false, true
}

// pingLoose sends count echo requests from ns to dst, 100 ms apart,
// whatever becomes of them.
func pingLoose(ns *netns, dst string, count int) string {
	out, _ := ns.run("ping", "-n", "-q", "-c", fmt.Sprint(count), "-i", "0.1", "-W", "1", dst)
	return out
}

// TestLifetimePackets runs A's outbound SA with soft_packets 20 and
// hard_packets 40, and B's matching inbound SA with soft 20 and hard 30.
// Crossing soft: each side logs one event line naming the SA, `state
// list` shows it dying, the metrics show it, and a fresh SA pair added
// over the control socket with the same (empty) selector takes the
// traffic at once. Back on the dying SA (the fresh one deleted), the
// traffic crosses B's hard limit, then A's: as in Linux, the one packet
// that finds the limit reached is dropped and counted
// (XfrmInStateExpired, XfrmOutStateExpired), the SA is removed within a
// couple of seconds, and what follows finds no SA (XfrmInNoStates,
// XfrmOutNoStates).
func TestLifetimePackets(t *testing.T) {
	spec := tunnelSpec{suite: suiteByName("aes-gcm-128"), extraA: "metrics: 127.0.0.1:9578\n"}
	p := newPair(t)
	cfgA, cfgB := spec.configs()
	cfgA = withLifetime(t, cfgA, spiAB, "out", "{soft_packets: 20, hard_packets: 40}")
	cfgB = withLifetime(t, cfgB, spiAB, "in", "{soft_packets: 20, hard_packets: 30}")
	da := startDaemon(t, p.a, cfgA)
	db := startDaemon(t, p.b, cfgB)
	outAB := stateKey("out", spiAB)

	// Soft: ping until A's out SA is dying (IPv6 router solicitations
	// and MLD reports of the new interfaces count too).
	for i := 0; !da.saStats()[outAB].SoftExpired; i++ {
		if i == 10 {
			t.Fatalf("A's out SA not soft-expired after 10 rounds of 3 pings: %+v", da.saStats()[outAB])
		}
		ping(t, p.a, innerB4, 3)
	}
	if st := da.saStats()[outAB]; st.Packets < 20 || st.Packets >= 40 || st.HardExpired {
		t.Fatalf("A's out SA when soft-expired: %+v, want 20..39 packets and not hard-expired", st)
	}
	line := da.waitEvent(t, 5*time.Second, "SA lifetime expired", append(saFields(spiAB, "out", underlayA4, underlayB4), "kind=soft", "reason=packets")...)
	if !strings.Contains(line, "level=warning") {
		t.Errorf("soft event line not at level warning: %s", line)
	}
	db.waitEvent(t, 5*time.Second, "SA lifetime expired", append(saFields(spiAB, "in", underlayA4, underlayB4), "kind=soft", "reason=packets")...)
	if n := strings.Count(da.log.String(), `msg="SA lifetime expired"`); n != 1 {
		t.Errorf("A logged %d lifetime events, want 1 (soft, once)", n)
	}
	if st := stanza(da.mustCtl(t, "state", "list"), spiAB, "out"); !strings.Contains(st, "expired soft") {
		t.Errorf("state list does not show A's out SA dying:\n%s", st)
	}
	if st := stanza(da.mustCtl(t, "state", "get", "--spi", "0x1001", "--dir", "out", "--dst", underlayB4), spiAB, "out"); !strings.Contains(st, "expired soft") {
		t.Errorf("state get does not show A's out SA dying:\n%s", st)
	}
	if js := da.mustCtl(t, "state", "list", "--json"); !regexp.MustCompile(`"soft_expired":\s*true`).MatchString(js) {
		t.Errorf("state list --json does not show soft_expired:\n%s", js)
	}
	body := scrape(t, p.a, "http://127.0.0.1:9578/metrics")
	switch v, found, family := saExpiredMetric(t, body, spiAB, "out", "soft"); {
	case !family:
		t.Logf("the scrape has no ipsecd_sa_expired family (metrics not exported yet): not checked")
	case !found || v != 1:
		t.Errorf("ipsecd_sa_expired{spi=0x1001,dir=out,kind=soft} = %v (found %v), want 1", v, found)
	default:
		if v, _, _ := saExpiredMetric(t, body, spiAB, "out", "hard"); v != 0 {
			t.Errorf("ipsecd_sa_expired{kind=hard} = %v before the hard limit, want 0", v)
		}
	}

	// A fresh SA pair with the same selector takes over from the dying one.
	const spiFresh = 0x1101
	key := randomKey(spec.suite.keyLen)
	db.addState(t, underlayA4, underlayB4, spiFresh, "in", key)
	da.addState(t, underlayA4, underlayB4, spiFresh, "out", key)
	oldPackets := da.saStats()[outAB].Packets
	ping(t, p.a, innerB4, 5)
	st := da.saStats()
	if got := st[stateKey("out", spiFresh)].Packets; got < 5 {
		t.Errorf("fresh out SA carried %d packets over 5 pings, want at least 5", got)
	}
	if got := st[outAB].Packets; got != oldPackets {
		t.Errorf("dying out SA went from %d to %d packets after a fresh SA came: want it left alone", oldPackets, got)
	}
	if got := db.saStats()[stateKey("in", spiFresh)].Packets; got < 5 {
		t.Errorf("B's fresh in SA opened %d packets, want at least 5", got)
	}

	// Back to the dying SA: delete the fresh out SA, then cross the hard
	// limits, B's inbound one (30) first, then A's outbound one (40).
	da.deleteState(t, spiFresh, underlayB4, "out")
	before := map[*daemon]map[string]uint64{da: da.stats(), db: db.stats()}
	pingLoose(p.a, innerB4, 25)
	db.waitEvent(t, 5*time.Second, "SA lifetime expired", append(saFields(spiAB, "in", underlayA4, underlayB4), "kind=hard", "reason=packets")...)
	db.waitEvent(t, 5*time.Second, "SA removed: its hard lifetime expired", saFields(spiAB, "in", underlayA4, underlayB4)...)
	db.waitGone(t, spiAB, "in", 2*time.Second)
	da.waitEvent(t, 5*time.Second, "SA lifetime expired", append(saFields(spiAB, "out", underlayA4, underlayB4), "kind=hard", "reason=packets")...)
	da.waitEvent(t, 5*time.Second, "SA removed: its hard lifetime expired", saFields(spiAB, "out", underlayA4, underlayB4)...)
	da.waitGone(t, spiAB, "out", 2*time.Second)
	if db.hasState(spiFresh, "in") != true || da.hasState(spiBA, "in") != true {
		t.Errorf("SAs without limits were removed too")
	}

	// After the removal the traffic finds no SA: fail closed.
	pingLoose(p.a, innerB4, 3)
	afterA, afterB := da.stats(), db.stats()
	// Allow for a packet or two racing the removal on a loaded machine;
	// Linux counts the one that finds the limit.
	if got := afterA["XfrmOutStateExpired"] - before[da]["XfrmOutStateExpired"]; got < 1 || got > 3 {
		t.Errorf("A: XfrmOutStateExpired grew by %d, want 1 (the packet that found the hard limit)", got)
	}
	if got := afterB["XfrmInStateExpired"] - before[db]["XfrmInStateExpired"]; got < 1 || got > 3 {
		t.Errorf("B: XfrmInStateExpired grew by %d, want 1", got)
	}
	if got := afterA["XfrmOutNoStates"] - before[da]["XfrmOutNoStates"]; got < 3 {
		t.Errorf("A: XfrmOutNoStates grew by %d after its out SA was removed and 3 pings, want at least 3", got)
	}
	if got := afterB["XfrmInNoStates"] - before[db]["XfrmInNoStates"]; got < 5 {
		t.Errorf("B: XfrmInNoStates grew by %d, want at least 5 (A's packets 31..40 for the removed in SA)", got)
	}
	if st := stanza(da.mustCtl(t, "state", "list"), spiAB, "out"); st != "" {
		t.Errorf("state list still shows the removed SA:\n%s", st)
	}
	if _, found, _ := saExpiredMetric(t, scrape(t, p.a, "http://127.0.0.1:9578/metrics"), spiAB, "out", "hard"); found {
		t.Errorf("the metrics still show the removed SA")
	}
}

// TestLifetimeAddTime runs A's outbound SA with soft_add_seconds 2 and
// hard_add_seconds 5. The soft expiry is logged after 2 s and `state list`
// shows the SA dying; a fresh SA pair added then takes the traffic; at 5 s
// the dying SA is removed while a ping runs through the fresh one without
// losing a packet, and no packet meets the expired SA
// (XfrmOutStateExpired stays 0, as in Linux when the timer expires a
// state nobody uses).
func TestLifetimeAddTime(t *testing.T) {
	spec := tunnelSpec{suite: suiteByName("chacha20-poly1305")}
	p := newPair(t)
	cfgA, cfgB := spec.configs()
	cfgA = withLifetime(t, cfgA, spiAB, "out", "{soft_add_seconds: 2, hard_add_seconds: 5}")
	started := time.Now()
	da := startDaemon(t, p.a, cfgA)
	db := startDaemon(t, p.b, cfgB)
	ping(t, p.a, innerB4, 2)

	fields := saFields(spiAB, "out", underlayA4, underlayB4)
	da.waitEvent(t, 15*time.Second, "SA lifetime expired", append(fields, "kind=soft", `reason="add time"`)...)
	softAt := time.Since(started)
	if softAt < 2*time.Second {
		t.Errorf("soft add-time expiry logged %v after start, want 2 s or more", softAt)
	}
	if st := da.saStats()[stateKey("out", spiAB)]; !st.SoftExpired || st.HardExpired {
		t.Errorf("A's out SA after its soft add time: %+v, want soft-expired only", st)
	}
	if st := stanza(da.mustCtl(t, "state", "list"), spiAB, "out"); !strings.Contains(st, "expired soft") {
		t.Errorf("state list does not show A's out SA dying:\n%s", st)
	}

	const spiFresh = 0x1101
	key := randomKey(spec.suite.keyLen)
	db.mustCtl(t, "state", "add", "--src", underlayA4, "--dst", underlayB4, "--spi", "0x1101", "--dir", "in",
		"--mode", "tunnel", "--if-id", "1", "--aead", "rfc7539esp(chacha20,poly1305)", "--key", hexKey(key),
		"--encap", "espinudp:4500:4500", "--replay-window", "1024")
	da.mustCtl(t, "state", "add", "--src", underlayA4, "--dst", underlayB4, "--spi", "0x1101", "--dir", "out",
		"--mode", "tunnel", "--if-id", "1", "--aead", "rfc7539esp(chacha20,poly1305)", "--key", hexKey(key),
		"--encap", "espinudp:4500:4500")
	before := da.stats()
	oldPackets := da.saStats()[stateKey("out", spiAB)].Packets

	// Ping through the hard expiry: 60 echoes 100 ms apart, all answered.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pinger := p.a.cmd(ctx, "ping", "-n", "-q", "-c", "60", "-i", "0.1", "-W", "2", innerB4)
	var out syncbuf.Buffer
	pinger.Stdout, pinger.Stderr = &out, &out
	if err := pinger.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if st, ok := da.saStats()[stateKey("out", spiAB)]; ok && st.Packets != oldPackets {
		t.Errorf("dying out SA went from %d to %d packets with a fresh SA there: want it left alone", oldPackets, st.Packets)
	}
	da.waitEvent(t, 15*time.Second, "SA lifetime expired", append(fields, "kind=hard", `reason="add time"`)...)
	if hardAt := time.Since(started); hardAt < 5*time.Second {
		t.Errorf("hard add-time expiry logged %v after start, want 5 s or more", hardAt)
	}
	da.waitEvent(t, 5*time.Second, "SA removed: its hard lifetime expired", fields...)
	da.waitGone(t, spiAB, "out", 2*time.Second)
	if err := pinger.Wait(); err != nil || !strings.Contains(out.String(), "60 received") {
		t.Errorf("ping across the hard expiry: want 60 received, got err %v:\n%s", err, out.String())
	}
	after := da.stats()
	for _, c := range []string{"XfrmOutStateExpired", "XfrmOutNoStates", "XfrmOutStateInvalid"} {
		if got := after[c] - before[c]; got != 0 {
			t.Errorf("A: %s grew by %d, want 0 (the traffic was on the fresh SA)", c, got)
		}
	}
	if got := da.saStats()[stateKey("out", spiFresh)].Packets; got < 60 {
		t.Errorf("fresh out SA carried %d packets, want at least 60", got)
	}
}
