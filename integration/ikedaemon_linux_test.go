//go:build linux

package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/ikenode"
)

// ikeSide is the config of one daemon of TestIKEDaemons: one connection
// with a PSK between the underlay addresses, one child carrying the
// inner /24s through ipsec1.
func ikeSide(local, remote, localID, remoteID, addr, remoteNet, startAction, extra string) string {
	return fmt.Sprintf(`log: {level: debug, format: text}
underlay: {udp: "0.0.0.0:4500"}
interfaces:
  - {name: ipsec1, if_id: 1, addresses: [%s/24], routes: [%s/24]}
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
%s
secrets:
  - {ids: [a.example.net, b.example.net], secret: "0x6d79207475726e656c207365637265742c206e6f7420666f7220757365"}
`, addr, remoteNet, local, remote, localID, remoteID, prefix24(addr), remoteNet, startAction, extra)
}

// ikeList returns the daemon's IKE SAs (ipsecd ike list --json).
func (d *daemon) ikeList() []ikenode.SAInfo {
	d.t.Helper()
	out, err := d.ctl("ike", "list", "--json")
	if err != nil {
		d.t.Fatalf("ipsecd ike list: %v\n%s", err, out)
	}
	var sas []ikenode.SAInfo
	if err := json.Unmarshal([]byte(out), &sas); err != nil {
		d.t.Fatalf("ipsecd ike list --json: %v\n%s", err, out)
	}
	return sas
}

// waitIKE waits until the daemon lists an established IKE SA whose
// installed child satisfies ok, and returns it.
func (d *daemon) waitIKE(what string, ok func(s ikenode.SAInfo, c ikenode.ChildInfo) bool) ikenode.SAInfo {
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

func anyChild(ikenode.SAInfo, ikenode.ChildInfo) bool { return true }

// TestIKEDaemons: two `ipsecd run` daemons negotiate with IKEv2 and a PSK
// (A initiates at start-up, B answers), and ping and a checksummed TCP
// stream cross the tunnel; then a child rekey and an IKE rekey started
// over the control socket keep it up, and a terminate takes the SAs down
// on both sides.
func TestIKEDaemons(t *testing.T) {
	p := newPair(t)
	b := startDaemon(t, p.b, ikeSide(underlayB4, underlayA4, "b.example.net", "a.example.net", innerB4, prefix24(innerA4), "none", ""))
	a := startDaemon(t, p.a, ikeSide(underlayA4, underlayB4, "a.example.net", "b.example.net", innerA4, prefix24(innerB4), "start", ""))

	sa := a.waitIKE("a child", anyChild)
	if !sa.Initiator || sa.RemoteID != "b.example.net" || !sa.NAT || sa.Children[0].Algorithms == "" || !sa.Children[0].Encap {
		t.Errorf("A's IKE SA: %+v; want the initiator, peer b.example.net, forced encapsulation (no raw ESP)", sa)
	}
	b.waitIKE("a child", anyChild)
	ping(t, p.a, innerB4, 3)
	tcpTransfer(t, p.a, p.b, innerB4, 4<<20)

	// Child rekey from B (the responder), then from A; IKE rekey from B.
	for _, step := range []struct {
		d    *daemon
		args []string
	}{{b, []string{"--child", "net"}}, {a, []string{"--child", "net"}}, {b, []string{"--ike", "peer"}}} {
		before := step.d.ikeList()[0]
		step.d.mustCtl(t, append([]string{"ike", "rekey"}, step.args...)...)
		if step.args[0] == "--child" {
			old := before.Children[0].SPIIn
			step.d.waitIKE("a rekeyed child", func(_ ikenode.SAInfo, c ikenode.ChildInfo) bool { return c.SPIIn != old })
		} else {
			old := before.SPIInitiator
			step.d.waitIKE("a rekeyed IKE SA", func(s ikenode.SAInfo, _ ikenode.ChildInfo) bool { return s.SPIInitiator != old })
		}
		ping(t, p.a, innerB4, 3)
		ping(t, p.b, innerA4, 3)
	}
	if got := len(a.ikeList()); got > 2 {
		t.Errorf("A lists %d IKE SAs after the rekeys, want 1 (or 2 while the old one's delete completes)", got)
	}

	a.mustCtl(t, "ike", "terminate", "--ike", "peer")
	for _, d := range []*daemon{a, b} {
		deadline := time.Now().Add(10 * time.Second)
		for len(d.ikeList()) != 0 || len(d.states()) != 0 {
			if time.Now().After(deadline) {
				out, _ := d.ctl("ike", "list")
				t.Fatalf("in %s: SAs left 10 s after terminate:\n%s\n%v", d.ns.name, out, d.states())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if out, err := p.a.run("ping", "-n", "-c", "1", "-w", "2", innerB4); err == nil || !strings.Contains(out, "0 received") {
		t.Errorf("ping crossed after terminate:\n%s", out)
	}
}
