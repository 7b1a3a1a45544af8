//go:build linux

package integration

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rewrite replaces the daemon's config file with cfg (the control key is
// kept) and sends SIGHUP.
func (d *daemon) reload(t *testing.T, cfg string) {
	t.Helper()
	if err := os.WriteFile(d.cfgPath, []byte(d.file(cfg)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
}

// lineOf is the 1-based line of the first line of text that contains s, or 0.
func lineOf(text, s string) int {
	for i, line := range strings.Split(text, "\n") {
		if strings.Contains(line, s) {
			return i + 1
		}
	}
	return 0
}

// secondTunnel is a second interface and SA pair for a tunnelSpec side:
// ipsec2 (if_id 2) with 100.64.1.1/24 on A routing 100.64.2.0/24, and the
// reverse on B; SPIs 0x1002 (A→B) and 0x2002 (B→A).
func secondTunnel(s *tunnelSpec, a bool, key12, key21 []byte) (iface, states string) {
	local, peer, my, their, out, in, kOut, kIn := underlayA4, underlayB4, "100.64.1", "100.64.2", 0x1002, 0x2002, key12, key21
	if !a {
		local, peer, my, their, out, in, kOut, kIn = underlayB4, underlayA4, "100.64.2", "100.64.1", 0x2002, 0x1002, key21, key12
	}
	iface = fmt.Sprintf("  - {name: ipsec2, if_id: 2, mtu: 1400, addresses: [%s.1/24], routes: [%s.0/24]}\n", my, their)
	for _, st := range []struct {
		src, dst, dir string
		spi           int
		key           []byte
	}{{local, peer, "out", out, kOut}, {peer, local, "in", in, kIn}} {
		states += fmt.Sprintf(`  - src: "%s"
    dst: "%s"
    spi: 0x%x
    dir: %s
    mode: tunnel
    if_id: 2
    %s
    encap: {type: espinudp, sport: 4500, dport: 4500}
`, st.src, st.dst, st.spi, st.dir, s.suite.yaml(st.key))
	}
	return iface, states
}

// withSecondTunnel adds secondTunnel's interface and states to a config
// made by tunnelSpec.configs.
func withSecondTunnel(cfg, iface, states string) string {
	cfg = strings.Replace(cfg, "states:\n", iface+"states:\n", 1)
	return cfg + states
}

// TestReload checks SIGHUP: a broken file is refused with its file, line
// and field named and the running SAs keep going; a valid change (a new
// interface and SA pair, a changed address) is applied while the SAs that
// did not change keep their sequence numbers.
func TestReload(t *testing.T) {
	spec := tunnelSpec{suite: suiteByName("aes-gcm-128")}
	p := newPair(t)
	cfgA, cfgB := spec.configs()
	da := startDaemon(t, p.a, cfgA)
	db := startDaemon(t, p.b, cfgB)
	ping(t, p.a, innerB4, 3)
	seq0 := da.state(spiAB, "out").Stats.Seq
	if seq0 < 3 {
		t.Fatalf("A's out SA seq = %d after 3 pings, want at least 3", seq0)
	}

	t.Run("broken file refused", func(t *testing.T) {
		key := hexKey(spec.keyAB)
		if !strings.Contains(cfgA, key) {
			t.Fatal("A's config does not hold its out key")
		}
		broken := strings.Replace(cfgA, key, "0x0102030405060708090a0b0c0d0e0f1011", 1)
		da.reload(t, broken)
		// The file starts with the control line startDaemon adds.
		want := fmt.Sprintf("%s:%d: states[0].aead.key:", da.cfgPath, lineOf(broken, "0x0102030405")+1)
		log := da.waitLog(t, "reload refused")
		if !strings.Contains(log, want) {
			t.Errorf("log does not name the file, line and field %q:\n%s", want, log)
		}
		ping(t, p.a, innerB4, 3)
		ping(t, p.b, innerA4, 2)
		if seq := da.state(spiAB, "out").Stats.Seq; seq < seq0+3 {
			t.Errorf("A's out SA seq = %d after 3 more pings, want at least %d (no reset)", seq, seq0+3)
		} else {
			seq0 = seq
		}
	})

	t.Run("valid change applied", func(t *testing.T) {
		k12, k21 := randomKey(spec.suite.keyLen), randomKey(spec.suite.keyLen)
		ifA, stA := secondTunnel(&spec, true, k12, k21)
		ifB, stB := secondTunnel(&spec, false, k12, k21)
		// A's ipsec1 moves from 198.51.100.1 to 198.51.100.7, and both
		// ipsec1 grow their MTU from 1400 to 1430 (workers with larger
		// buffers replace the running ones).
		newA := strings.Replace(withSecondTunnel(cfgA, ifA, stA), innerA4+"/24", "198.51.100.7/24", 1)
		newA = strings.Replace(newA, "mtu: 1400", "mtu: 1430", 1)
		newB := strings.Replace(withSecondTunnel(cfgB, ifB, stB), "mtu: 1400", "mtu: 1430", 1)
		reloads := strings.Count(da.log.String(), "reloaded:")
		db.reload(t, newB)
		db.waitLog(t, "reloaded:")
		da.reload(t, newA)
		for deadline := time.Now().Add(10 * time.Second); strings.Count(da.log.String(), "reloaded:") == reloads; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("A did not reload within 10 s:\n%s", da.log.String())
			}
		}
		addrs := p.a.mustRun(t, "ip", "-o", "addr", "show", "dev", "ipsec1")
		if !strings.Contains(addrs, "198.51.100.7/24") || strings.Contains(addrs, innerA4+"/24") {
			t.Errorf("A's ipsec1 addresses after reload, want 198.51.100.7/24 and not %s/24:\n%s", innerA4, addrs)
		}
		ping(t, p.a, innerB4, 3)
		ping(t, p.b, "198.51.100.7", 2)
		// 1428-byte packets fit only the grown MTU.
		for _, side := range []struct {
			ns  *netns
			dst string
		}{{p.a, innerB4}, {p.b, "198.51.100.7"}} {
			if out, err := side.ns.run("ping", "-n", "-q", "-M", "do", "-s", "1400", "-c", "2", "-i", "0.2", "-w", "10", side.dst); err != nil || !strings.Contains(out, "2 received") {
				t.Errorf("ping -s 1400 %s from %s after the MTU grew: %v\n%s", side.dst, side.ns.name, err, out)
			}
		}
		ping(t, p.a, "100.64.2.1", 3)
		ping(t, p.b, "100.64.1.1", 3)
		tcpTransfer(t, p.a, p.b, "100.64.2.1", 1<<20)
		if seq := da.state(spiAB, "out").Stats.Seq; seq < seq0+3 {
			t.Errorf("A's out SA seq = %d, want at least %d: an unchanged SA kept across the reload", seq, seq0+3)
		}
		if s := da.state(0x1002, "out"); s.Stats.Packets == 0 {
			t.Errorf("A's new out SA 0x1002 carried no packets")
		}
		for _, d := range []*daemon{da, db} {
			st := d.stats()
			for _, c := range []string{"XfrmInStateSeqError", "XfrmInStateProtoError", "XfrmOutError"} {
				if st[c] != 0 {
					t.Errorf("%s: %s = %d, want 0", d.ns.name, c, st[c])
				}
			}
			// B's new ipsec2 sends the kernel's IPv6 router solicitation
			// as soon as it is up, before A (reloaded second) has the
			// inbound SA for it.
			if c := st["XfrmInNoStates"]; c > 2 {
				t.Errorf("%s: XfrmInNoStates = %d, want at most 2", d.ns.name, c)
			}
		}
	})
}

// TestSignals checks that SIGTERM and SIGINT stop the daemon with exit
// status 0 and remove its TUN devices.
func TestSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			ns := newNetns(t)
			d := startDaemon(t, ns, `log: {level: info, format: text}
underlay: {udp: "127.0.0.1:4500"}
interfaces:
  - {name: ipsec1, if_id: 1, addresses: [198.51.100.1/24, "2001:db8:a::1/64"], routes: [203.0.113.0/24]}
  - {name: ipsec2, if_id: 2, queues: 2}
`)
			tuns := regexp.MustCompile(`: ipsec\d+`)
			if n := len(tuns.FindAllString(ns.mustRun(t, "ip", "-o", "link"), -1)); n != 2 {
				t.Fatalf("%d ipsec links while running, want 2", n)
			}
			d.cmd.Process.Signal(sig)
			if err := d.waitExit(t, 10*time.Second); err != nil {
				t.Errorf("exit after %v: %v, want status 0", sig, err)
			}
			if links := ns.mustRun(t, "ip", "-o", "link"); tuns.MatchString(links) {
				t.Errorf("TUN devices left after %v:\n%s", sig, links)
			}
			if _, err := os.Stat(d.control); !os.IsNotExist(err) {
				t.Errorf("control socket %s after %v: %v, want it removed", d.control, sig, err)
			}
		})
	}
}
