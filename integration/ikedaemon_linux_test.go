//go:build linux

package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/control"
)

// ikeSide is the config of one daemon of TestIKEDaemons: one connection
// with a PSK between the underlay addresses, one child carrying the
// inner /24s through ipsec1.
func ikeSide(local, remote, localID, remoteID, addr, remoteNet, startAction, static string) string {
	return ikeSideRaw(false, "0.0.0.0", local, remote, localID, remoteID, addr, remoteNet, startAction, static)
}

// staticBeside is a second interface, ipsec2 (if_id 2, 100.64.1.1/24 on A
// routing 100.64.2.0/24, the reverse on B), with a hand-keyed pair of
// states of the file (SPIs 0x3001 A→B, 0x3002 B→A): they run beside
// IKE's and a reload of the connections leaves them alone.
func staticBeside(a bool, kAB, kBA []byte) string {
	local, remote, addr, route, out, in, kOut, kIn := underlayA4, underlayB4, "100.64.1.1", "100.64.2.0", 0x3001, 0x3002, kAB, kBA
	if !a {
		local, remote, addr, route, out, in, kOut, kIn = underlayB4, underlayA4, "100.64.2.1", "100.64.1.0", 0x3002, 0x3001, kBA, kAB
	}
	state := func(src, dst string, spi int, dir string, k []byte) string {
		return fmt.Sprintf(`  - {src: "%s", dst: "%s", spi: 0x%x, dir: %s, mode: tunnel, if_id: 2, aead: {name: "rfc4106(gcm(aes))", key: "0x%x", icv_bits: 128}, encap: {type: espinudp, sport: 4500, dport: 4500}}
`, src, dst, spi, dir, k)
	}
	return fmt.Sprintf("  - {name: ipsec2, if_id: 2, addresses: [%s/24], routes: [%s/24]}\nstates:\n", addr, route) +
		state(local, remote, out, "out", kOut) + state(remote, local, in, "in", kIn)
}

// ikeSideRaw is ikeSide with underlay.raw_esp as raw says (IKE then stays
// on port 500 and ESP is IP protocol 50) and the underlay bound to
// underlay (then it reports no local address: IKE on port 4500 is taken
// as arriving there). static goes after ipsec1's line: more interfaces,
// then states: beside IKE's.
func ikeSideRaw(raw bool, underlay, local, remote, localID, remoteID, addr, remoteNet, startAction, static string) string {
	return fmt.Sprintf(`log: {level: debug, format: text}
underlay: {udp: "%s:4500", raw_esp: %t}
interfaces:
  - {name: ipsec1, if_id: 1, addresses: [%s/24], routes: [%s/24]}
%s
ike: {port: 500}
connections:
  - name: peer
    local_addrs: [%s]
    remote_addrs: [%s]
    proposals: [aes256-sha256-x25519]
    dpd_delay: 2s
    local: {auth: psk, id: %s}
    remote: {auth: psk, id: %s}
    children:
      - name: net
        if_id: 1
        local_ts: [%s/24]
        remote_ts: [%s/24]
        esp_proposals: [aes128gcm16]
        start_action: %s
secrets:
  - {ids: [a.example.net, b.example.net], secret: "0x6d79207475726e656c207365637265742c206e6f7420666f7220757365"}
`, underlay, raw, addr, remoteNet, static, local, remote, localID, remoteID, prefix24(addr), remoteNet, startAction)
}

// ikeList returns the daemon's IKE SAs (ipsecd ike list --json).
func (d *daemon) ikeList() []control.IKESAInfo {
	d.t.Helper()
	out, err := d.ctl("ike", "list", "--json")
	if err != nil {
		d.t.Fatalf("ipsecd ike list: %v\n%s", err, out)
	}
	var sas []control.IKESAInfo
	if err := json.Unmarshal([]byte(out), &sas); err != nil {
		d.t.Fatalf("ipsecd ike list --json: %v\n%s", err, out)
	}
	return sas
}

// waitIKE waits until the daemon lists an established IKE SA whose
// installed child satisfies ok, and returns it.
func (d *daemon) waitIKE(what string, ok func(s control.IKESAInfo, c control.IKEChildInfo) bool) control.IKESAInfo {
	d.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, s := range d.ikeList() {
			if s.State != "ESTABLISHED" {
				continue
			}
			for _, c := range s.Children {
				if c.State == "INSTALLED" && ok(s, c) {
					return s
				}
			}
		}
		if time.Now().After(deadline) {
			out, _ := d.ctl("ike", "list")
			d.t.Fatalf("in %s: no established IKE SA with %s within 20 s:\n%s", d.ns.name, what, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func anyChild(control.IKESAInfo, control.IKEChildInfo) bool { return true }

// TestIKEDaemons: two `ipsecd run` daemons negotiate with IKEv2 and a PSK
// (A initiates at start-up, B answers), and ping and a checksummed TCP
// stream cross the tunnel; child rekeys from each side and an IKE rekey,
// started over the control socket, keep it up; terminate takes the SAs
// down on both sides and initiate brings them back; SIGHUP keeps an
// unchanged connection, re-establishes a changed one and ends a removed
// one, while the file's own states on a second interface keep working.
func TestIKEDaemons(t *testing.T) {
	for _, raw := range []bool{false, true} {
		t.Run(map[bool]string{false: "udp", true: "raw"}[raw], func(t *testing.T) { testIKEDaemons(t, raw) })
	}
}

// testIKEDaemons is TestIKEDaemons with ESP in UDP (forced: the underlay
// has no raw ESP socket, so IKE moves to port 4500 with it) or, with
// raw, as IP protocol 50 (IKE stays on port 500). The underlay is bound
// to the underlay address (TestIKEDaemonCharon's to 0.0.0.0).
func testIKEDaemons(t *testing.T, raw bool) {
	p := newPair(t)
	kAB, kBA := randomKey(20), randomKey(20)
	b := startDaemon(t, p.b, ikeSideRaw(raw, underlayB4, underlayB4, underlayA4, "b.example.net", "a.example.net", innerB4, prefix24(innerA4), "none", staticBeside(false, kAB, kBA)))
	cfgA := ikeSideRaw(raw, underlayA4, underlayA4, underlayB4, "a.example.net", "b.example.net", innerA4, prefix24(innerB4), "start", staticBeside(true, kAB, kBA))
	a := startDaemon(t, p.a, cfgA)

	sa := a.waitIKE("a child", anyChild)
	wantPort := map[bool]uint16{false: 4500, true: 500}[raw]
	if !sa.Initiator || sa.RemoteID != "b.example.net" || sa.NAT == raw || sa.Children[0].Algorithms == "" || sa.Children[0].Encap == raw || sa.Remote.Port() != wantPort {
		t.Errorf("A's IKE SA: %+v; want the initiator, peer b.example.net, on port %d, UDP encapsulation %v", sa, wantPort, !raw)
	}
	b.waitIKE("a child", anyChild)
	ping(t, p.a, innerB4, 3)
	ping(t, p.a, "100.64.2.1", 3) // the file's states, beside IKE's
	tcpTransfer(t, p.a, p.b, innerB4, 4<<20)

	// Child rekey from B (the responder), then from A; IKE rekey from B;
	// while numbered UDP datagrams flow each way and a TCP stream from A
	// to B, none of which may be lost (make-before-break).
	st := startStreams(t, p)
	countersA, countersB := a.stats(), b.stats()
	time.Sleep(300 * time.Millisecond)
	for _, step := range []struct {
		d    *daemon
		args []string
	}{{b, []string{"--child", "net"}}, {a, []string{"--child", "net"}}, {b, []string{"--ike", "peer"}}} {
		before := step.d.ikeList()[0]
		step.d.mustCtl(t, append([]string{"ike", "rekey"}, step.args...)...)
		if step.args[0] == "--child" {
			old := before.Children[0].SPIIn
			step.d.waitIKE("a rekeyed child", func(_ control.IKESAInfo, c control.IKEChildInfo) bool { return c.SPIIn != old })
		} else {
			old := before.SPIInitiator
			step.d.waitIKE("a rekeyed IKE SA", func(s control.IKESAInfo, _ control.IKEChildInfo) bool { return s.SPIInitiator != old })
		}
		ping(t, p.a, innerB4, 3)
		ping(t, p.b, innerA4, 3)
	}
	time.Sleep(300 * time.Millisecond)
	st.stopAndCheck(t, false)
	logDropCounters(t, "A", countersA, a.stats())
	logDropCounters(t, "B", countersB, b.stats())
	if got := len(a.ikeList()); got > 2 {
		t.Errorf("A lists %d IKE SAs after the rekeys, want 1 (or 2 while the old one's delete completes)", got)
	}

	a.mustCtl(t, "ike", "terminate", "--ike", "peer")
	bothEmpty(t, a, b)
	a.mustCtl(t, "ike", "initiate", "--ike", "peer")
	up := a.waitIKE("a child after ike initiate", anyChild)
	ping(t, p.a, innerB4, 3)

	// SIGHUP: an unchanged connection stays up, a changed one is brought
	// up again, a removed one goes.
	a.reload(t, cfgA)
	a.waitLogCount(t, "unchanged=1", 1)
	if now := a.ikeList(); len(now) != 1 || now[0].SPIInitiator != up.SPIInitiator {
		t.Errorf("an unchanged connection's IKE SA changed on reload: %+v, was %+v", now, up)
	}
	a.reload(t, strings.Replace(cfgA, "dpd_delay: 2s", "dpd_delay: 3s", 1))
	a.waitLogCount(t, "changed=1", 1)
	a.waitIKE("a new IKE SA after the connection changed", func(s control.IKESAInfo, _ control.IKEChildInfo) bool { return s.SPIInitiator != up.SPIInitiator })
	ping(t, p.a, innerB4, 3)
	a.reload(t, cfgA[:strings.Index(cfgA, "connections:")])
	a.waitLogCount(t, "removed=1", 1)
	bothEmpty(t, a, b)
	if n := len(a.states()); n != 2 {
		t.Errorf("A holds %d SAs after the reloads, want the file's 2", n)
	}
	ping(t, p.a, "100.64.2.1", 3) // the file's states outlived every reload
	if out, err := p.a.run("ping", "-n", "-c", "1", "-w", "2", innerB4); err == nil || !strings.Contains(out, "0 received") {
		t.Errorf("ping crossed after terminate:\n%s", out)
	}
}

// bothEmpty waits up to 20 s for each daemon to list no IKE SA and hold
// no SA of ipsec1 (IKE's; ipsec2 has the file's): a child rekeyed just
// before keeps its old inbound SA 5 s (ikenode.DefaultLinger).
func bothEmpty(t *testing.T, ds ...*daemon) {
	t.Helper()
	ikeStates := func(d *daemon) int {
		n := 0
		for _, s := range d.states() {
			if s.IfID == 1 {
				n++
			}
		}
		return n
	}
	for _, d := range ds {
		deadline := time.Now().Add(20 * time.Second)
		for len(d.ikeList()) != 0 || ikeStates(d) != 0 {
			if time.Now().After(deadline) {
				out, _ := d.ctl("ike", "list")
				t.Fatalf("in %s: SAs left after 20 s:\n%s\n%v", d.ns.name, out, d.states())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// waitLogCount waits until the daemon's log has n lines with want.
func (d *daemon) waitLogCount(t *testing.T, want string, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); strings.Count(d.log.String(), want) < n; {
		if time.Now().After(deadline) {
			t.Fatalf("ipsecd log in %s: %d lines with %q within 10 s, want %d:\n%s", d.ns.name, strings.Count(d.log.String(), want), want, n, d.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// strongswan.conf for TestIKEDaemonCharon: kernel-libipsec (this kernel
// has no ESP) and a log in the test's directory.
const ikeCharonConf = `charon {
  load = random nonce openssl pem pkcs1 pkcs8 x509 pubkey revocation constraints curve25519 gcm chapoly aes sha2 sha1 hmac kdf gmp kernel-libipsec kernel-netlink socket-default vici
  install_routes = yes
  filelog { test { path = %s
                   default = 1
                   flush_line = yes } }
  syslog { daemon { default = -1 } }
}
`

// swanctl.conf of TestIKEDaemonCharon: the mirror of ikeSide's A.
const ikeCharonSwanctl = `connections {
  peer {
    local_addrs = 192.0.2.2
    remote_addrs = 192.0.2.1
    proposals = aes256-sha256-x25519
    local {
      auth = psk
      id = b.example.net
    }
    remote {
      auth = psk
      id = a.example.net
    }
    children {
      net {
        local_ts = 203.0.113.0/24
        remote_ts = 198.51.100.0/24
        esp_proposals = aes128gcm16
      }
    }
  }
}
secrets {
  ike-a {
    id-a = a.example.net
    id-b = b.example.net
    secret = 0x6d79207475726e656c207365637265742c206e6f7420666f7220757365
  }
}
`

// TestIKEDaemonCharon: `ipsecd run` against strongSwan's charon, a smoke
// test (the full matrix is elsewhere): ipsecd initiates at start-up;
// charon rekeys the child and the IKE SA, then ipsecd does; ipsecd
// terminates, charon initiates, and charon's delete clears ipsecd. Ping
// crosses at each step.
func TestIKEDaemonCharon(t *testing.T) {
	const charonBin = "/usr/lib/ipsec/charon"
	if _, err := os.Stat(charonBin); err != nil {
		t.Skip("strongSwan's charon is not installed (scripts/test.sh installs strongswan-charon)")
	}
	p := newPair(t)
	// kernel-libipsec routes remote_ts into its TUN from an address of
	// local_ts, and needs a route towards the peer's side to do it.
	p.b.mustRun(t, "ip", "addr", "add", innerB4+"/32", "dev", "lo")
	p.b.mustRun(t, "ip", "route", "add", "default", "via", underlayA4)
	dir := t.TempDir()
	conf, swanctlConf, logPath := filepath.Join(dir, "strongswan.conf"), filepath.Join(dir, "swanctl.conf"), filepath.Join(dir, "charon.log")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(ikeCharonConf, logPath)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(swanctlConf, []byte(ikeCharonSwanctl), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", p.b.name, "unshare", "-m", "sh", "-c",
		"mount -t tmpfs tmpfs /run && exec env STRONGSWAN_CONF="+conf+" "+charonBin)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("charon log:\n%s", b)
		}
	})
	// ip netns exec, unshare and sh all exec: the pid is charon's.
	swanctl := func(args ...string) (string, error) {
		out, err := exec.Command("nsenter", append([]string{"-t", fmt.Sprint(cmd.Process.Pid), "-m", "-n", "swanctl"}, args...)...).CombinedOutput()
		return string(out), err
	}
	for i := 0; ; i++ {
		out, err := swanctl("--load-all", "--file", swanctlConf)
		if err == nil {
			break
		}
		if i == 50 {
			t.Fatalf("charon did not take its config within 5 s: %v\n%s", err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}

	a := startDaemon(t, p.a, ikeSide(underlayA4, underlayB4, "a.example.net", "b.example.net", innerA4, prefix24(innerB4), "start", ""))
	first := a.waitIKE("a child with charon", anyChild)
	ping(t, p.a, innerB4, 3)
	// Numbered datagrams each way at a rate charon's userspace data
	// path (kernel-libipsec) keeps up with: none may be lost through the
	// rekeys but those charon's namespace counted as dropped before
	// charon read them (charonStreams): with charon stopped for 1.5 s
	// after its child rekey, as a loaded machine stalls it, 284 of
	// ipsecd's datagrams overflowed charon's socket.
	st := startCharonStreams(t, p, a, cmd.Process.Pid, 300, 200)
	time.Sleep(300 * time.Millisecond)

	if out, err := swanctl("--rekey", "--child", "net"); err != nil {
		t.Fatalf("swanctl --rekey: %v\n%s", err, out)
	}
	a.waitIKE("the child charon rekeyed", func(_ control.IKESAInfo, c control.IKEChildInfo) bool { return c.SPIIn != first.Children[0].SPIIn })
	ping(t, p.a, innerB4, 3)
	if out, err := swanctl("--rekey", "--ike", "peer"); err != nil {
		t.Fatalf("swanctl --rekey --ike: %v\n%s", err, out)
	}
	a.waitIKE("the IKE SA charon rekeyed", func(s control.IKESAInfo, _ control.IKEChildInfo) bool { return s.SPIInitiator != first.SPIInitiator })
	ping(t, p.a, innerB4, 3)
	a.mustCtl(t, "ike", "rekey", "--ike", "peer")
	a.mustCtl(t, "ike", "rekey", "--child", "net")
	ping(t, p.a, innerB4, 3)
	time.Sleep(500 * time.Millisecond)
	st.stopAndCheck(t)

	a.mustCtl(t, "ike", "terminate", "--ike", "peer")
	bothEmpty(t, a)
	if out, err := swanctl("--initiate", "--child", "net"); err != nil {
		t.Fatalf("swanctl --initiate: %v\n%s", err, out)
	}
	if s := a.waitIKE("a child charon initiated", anyChild); s.Initiator {
		t.Errorf("ipsecd lists itself as the initiator of charon's IKE SA: %+v", s)
	}
	ping(t, p.a, innerB4, 3)
	if out, err := swanctl("--terminate", "--ike", "peer"); err != nil {
		t.Fatalf("swanctl --terminate: %v\n%s", err, out)
	}
	bothEmpty(t, a)
}
