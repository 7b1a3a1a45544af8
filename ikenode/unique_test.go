package ikenode

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/pool"
)

// uniqueGatewayYAML is B (127.0.0.2), a gateway whose road warriors all
// prove a.test and get an address of 10.3.0.6/31, under unique %s.
const uniqueGatewayYAML = `interfaces:
  - {name: ipsec1, if_id: 1, routes: [10.3.0.6/31]}
pools:
  - {name: rw, addrs: 10.3.0.6/31}
connections:
  - name: rw
    local_addrs: [127.0.0.2]
    remote_addrs: ["%%any"]
    proposals: [aes128gcm16-prfsha256-x25519]
    unique: %s
    pools: [rw]
    local: {auth: psk, id: b.test}
    remote: {auth: psk, id: a.test}
    children:
      - {name: net, if_id: 1, local_ts: [10.2.0.0/24], remote_ts: [dynamic], esp_proposals: [aes128gcm16]}
secrets:
  - {ids: [a.test, b.test], secret: "0x0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20"}
`

// uniqueClientYAML is a road warrior at %s proving a.test, asking for a
// virtual IP; its unique %s (never: it sends no INITIAL_CONTACT).
const uniqueClientYAML = `interfaces:
  - {name: ipsec1, if_id: 1}
connections:
  - name: gw
    local_addrs: [%s]
    remote_addrs: [127.0.0.2]
    proposals: [aes128gcm16-prfsha256-x25519]
    unique: %s
    vips: [0.0.0.0]
    local: {auth: psk, id: a.test}
    remote: {auth: psk, id: b.test}
    children:
      - {name: net, if_id: 1, local_ts: [dynamic], remote_ts: [10.2.0.0/24], esp_proposals: [aes128gcm16], start_action: start}
secrets:
  - {ids: [a.test, b.test], secret: "0x0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20"}
`

// bySource returns the gateway's IKE SAs from address from.
func bySource(e *endpoint, from string) []control.IKESAInfo {
	l, _ := e.m.List()
	var out []control.IKESAInfo
	for _, s := range l {
		if s.Remote.Addr() == netip.MustParseAddr(from) {
			out = append(out, s)
		}
	}
	return out
}

// TestUnique: two road warriors prove the same identity, the second
// after the first is up, against a gateway with unique keep or replace.
// Without INITIAL_CONTACT (the clients' unique: never), replace deletes
// the first's IKE SA with a Delete (the first hears it and lists
// nothing) and gives the second the first's address; keep refuses the
// second with AUTHENTICATION_FAILED and leaves the first as it was. With
// INITIAL_CONTACT the second replaces the first under either, without
// a Delete (the peer says it forgot it), as strongSwan does.
func TestUnique(t *testing.T) {
	for _, tt := range []struct {
		name, gateway, clients     string
		secondUp, firstHearsDelete bool
	}{
		{"replace", "replace", "never", true, true},
		{"keep", "keep", "never", false, false},
		{"replace, INITIAL_CONTACT", "replace", "no", true, false},
		{"keep, INITIAL_CONTACT", "keep", "no", true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := newTestNet()
			gwCfg := parseYAML(t, fmt.Sprintf(uniqueGatewayYAML, tt.gateway))
			set, err := pool.NewSet(pool.New("rw", gwCfg.Pool("rw").Addrs))
			if err != nil {
				t.Fatal(err)
			}
			b := startDaemon(t, n, Config{IKE: &gwCfg.IKEConfig, RawESP: true, Pools: set,
				Listen: []netip.Addr{netip.MustParseAddr("127.0.0.2")}}, 0x2000)
			first := startOn(t, n, parseYAML(t, fmt.Sprintf(uniqueClientYAML, "127.0.0.1", tt.clients)), b.m.Port(), 0x1000, "127.0.0.1")
			n.waitFor(t, "the first's SA", func() bool { return established(first) && len(bySource(b, "127.0.0.1")) == 1 })
			old := bySource(b, "127.0.0.1")[0]
			if fmt.Sprint(old.RemoteVIPs) != "[10.3.0.6]" {
				t.Fatalf("the first has %v; want [10.3.0.6]", old.RemoteVIPs)
			}
			b.ev.take()

			second := startOn(t, n, parseYAML(t, fmt.Sprintf(uniqueClientYAML, "127.0.0.3", tt.clients)), b.m.Port(), 0x3000, "127.0.0.3")
			n.waitFor(t, "the second's IKE_AUTH", func() bool {
				l, _ := second.m.List()
				return established(second) || len(l) == 0 || strings.Contains(second.log.String(), "IKE SA down")
			})
			ctr := b.m.Counters()
			if !tt.secondUp {
				if established(second) {
					t.Fatalf("the second is up; want it refused (unique: keep)")
				}
				if !strings.Contains(second.log.String(), "authentication failed") {
					t.Errorf("the second's log does not say it was refused:\n%s", second.log.String())
				}
				now := bySource(b, "127.0.0.1")
				if len(now) != 1 || now[0].SPIInitiator != old.SPIInitiator || now[0].State != "ESTABLISHED" || len(now[0].Children) != 1 || !established(first) {
					t.Fatalf("the first's SA after the second was refused: %+v; want %s_i still up with its child", now, old.SPIInitiator)
				}
				if slices.ContainsFunc(bySource(b, "127.0.0.3"), func(s control.IKESAInfo) bool { return s.State == "ESTABLISHED" }) {
					t.Errorf("the gateway lists the second's refused SA as established")
				}
				if ctr.UniqueRefused != 1 || ctr.UniqueReplaced != 0 || ctr.AuthFailures != 1 {
					t.Errorf("counters: refused %d, replaced %d, auth failures %d; want 1, 0, 1", ctr.UniqueRefused, ctr.UniqueReplaced, ctr.AuthFailures)
				}
				if !strings.Contains(b.log.String(), "the new one is refused with AUTHENTICATION_FAILED (unique: keep)") {
					t.Errorf("the gateway does not log why it refused the second")
				}
				return
			}
			if !established(second) {
				t.Fatalf("the second is not up:\n%s", second.log.String())
			}
			n.waitFor(t, "the first's SA to go at the gateway", func() bool {
				return !slices.ContainsFunc(bySource(b, "127.0.0.1"), func(s control.IKESAInfo) bool { return s.State == "ESTABLISHED" })
			})
			if now := bySource(b, "127.0.0.3"); len(now) != 1 || fmt.Sprint(now[0].RemoteVIPs) != "[10.3.0.6]" {
				t.Fatalf("the second's SA: %+v; want one with the first's address, 10.3.0.6", now)
			}
			if tt.firstHearsDelete {
				n.waitFor(t, "the first to hear the Delete", func() bool { l, _ := first.m.List(); return len(l) == 0 })
				if ctr.UniqueReplaced != 1 {
					t.Errorf("replaced %d; want 1", ctr.UniqueReplaced)
				}
				if !slices.ContainsFunc(b.ev.take(), func(e Event) bool { return e.Type == EventIKEDown && e.Reason == ReasonReplaced }) {
					t.Errorf("no ike_down with reason %q", ReasonReplaced)
				}
			} else if !established(first) {
				t.Errorf("the first heard a Delete; INITIAL_CONTACT says its peer forgot it, none is sent")
			}
			if ctr.UniqueRefused != 0 {
				t.Errorf("refused %d; want 0", ctr.UniqueRefused)
			}
		})
	}
}

// TestUniqueEAPIdentity: with EAP, uniqueness compares the EAP identity,
// not the IKE identity (road warriors name themselves as they like, or
// by an address behind a NAT). Under unique: replace, bob's login with
// the IKE identity alice's client used leaves alice's IKE SA up; alice's
// login from another client with another IKE identity replaces her
// first IKE SA, and bob's stays.
func TestUniqueEAPIdentity(t *testing.T) {
	n := newTestNet()
	dir := t.TempDir()
	pki(t, dir, "gw.test")
	gw := fmt.Sprintf(`interfaces:
  - {name: ipsec1, if_id: 1, addresses: [10.2.0.1/24], routes: [10.1.0.0/16]}
connections:
  - name: rw
    local_addrs: [127.0.0.2]
    proposals: [aes128gcm16-prfsha256-x25519]
    unique: replace
    local: {auth: pubkey, id: gw.test, cert: %[1]s/gw.test.pem, key: %[1]s/gw.test.key}
    remote: {auth: eap-mschapv2}
    children:
      - {name: net, if_id: 1, local_ts: [10.2.0.0/24], remote_ts: [10.1.0.0/16], esp_proposals: [aes128gcm16]}
secrets:
  - {type: eap, ids: [alice], secret: alice-pw}
  - {type: eap, ids: [bob], secret: bob-pw}
`, dir)
	// client logs in from addr as IKE identity id with EAP identity
	// user; it sends no INITIAL_CONTACT (unique: never), so that the
	// gateway's replace alone acts.
	client := func(addr, net, id, user string) string {
		return eapClientYAML(addr, net, id, user, user+"-pw", dir, "never", "start")
	}
	upFrom := func(b *endpoint, addr string) bool {
		return slices.ContainsFunc(bySource(b, addr), func(s control.IKESAInfo) bool { return s.State == "ESTABLISHED" })
	}
	b := startOn(t, n, parseYAML(t, gw), 0, 0x2000, "127.0.0.2")
	startOn(t, n, parseYAML(t, client("127.0.0.1", "10.1.1", "phone.test", "alice")), b.m.Port(), 0x1000, "127.0.0.1")
	n.waitFor(t, "alice's first IKE SA", func() bool { return upFrom(b, "127.0.0.1") })
	startOn(t, n, parseYAML(t, client("127.0.0.4", "10.1.4", "phone.test", "bob")), b.m.Port(), 0x4000, "127.0.0.4")
	n.waitFor(t, "bob's IKE SA", func() bool { return upFrom(b, "127.0.0.4") })
	if !upFrom(b, "127.0.0.1") || b.m.Counters().UniqueReplaced != 0 {
		t.Fatalf("bob, with alice's IKE identity, replaced her IKE SA; only the EAP identity names the user")
	}
	startOn(t, n, parseYAML(t, client("127.0.0.3", "10.1.3", "laptop.test", "alice")), b.m.Port(), 0x3000, "127.0.0.3")
	n.waitFor(t, "alice's second IKE SA to replace her first", func() bool { return upFrom(b, "127.0.0.3") && !upFrom(b, "127.0.0.1") })
	if !upFrom(b, "127.0.0.4") {
		t.Errorf("bob's IKE SA went with alice's")
	}
	if got := b.m.Counters().UniqueReplaced; got != 1 {
		t.Errorf("replaced %d; want 1", got)
	}
}
