package ikenode

import (
	"fmt"
	"testing"

	"github.com/ipsecd/ipsecd/control"
)

// TestReloadEAPUsers: a gateway's EAP users change on reload without its
// connection changing: a user added logs in, a changed password refuses
// the old one and admits the new one (the client's own password changes
// by its reload too), a removed user is refused at the next login; the
// other users' IKE SAs stay as they were (same SPIs) throughout.
func TestReloadEAPUsers(t *testing.T) {
	n := newTestNet()
	dir := t.TempDir()
	pki(t, dir, "gw.test")
	const gwYAML = `interfaces:
  - {name: ipsec1, if_id: 1, addresses: [10.2.0.1/24], routes: [10.1.0.0/16]}
connections:
  - name: rw
    local_addrs: [127.0.0.2]
    proposals: [aes128gcm16-prfsha256-x25519]
    local: {auth: pubkey, id: gw.test, cert: %[1]s/gw.test.pem, key: %[1]s/gw.test.key}
    remote: {auth: eap-mschapv2}
    children:
      - {name: net, if_id: 1, local_ts: [10.2.0.0/24], remote_ts: [10.1.0.0/16], esp_proposals: [aes128gcm16]}
secrets:
%[2]s`
	gw := func(users string) string { return fmt.Sprintf(gwYAML, dir, users) }
	client := func(addr, net, user, pw string) string {
		return eapClientYAML(addr, net, user+".test", user, pw, dir, "", "none")
	}

	b := startOn(t, n, parseYAML(t, gw("  - {type: eap, ids: [alice], secret: alice-pw-1}\n")), 0, 0x2000, "127.0.0.2")
	alice := startOn(t, n, parseYAML(t, client("127.0.0.1", "10.1.1", "alice", "alice-pw-1")), b.m.Port(), 0x1000, "127.0.0.1")
	carol := startOn(t, n, parseYAML(t, client("127.0.0.3", "10.1.3", "carol", "carol-pw")), b.m.Port(), 0x3000, "127.0.0.3")

	// login has c log in anew (its IKE SA, if any, terminated first)
	// and reports whether it came up; a refused login leaves no SA.
	login := func(c *endpoint) bool {
		t.Helper()
		if len(listed(c, "rw", "ESTABLISHED")) > 0 {
			if err := c.m.Terminate(Target{IKE: "rw"}); err != nil {
				t.Fatal(err)
			}
			n.waitFor(t, "the old IKE SA gone", func() bool { return len(list(t, c)) == 0 })
		}
		if err := c.m.Initiate(Target{IKE: "rw"}); err != nil {
			t.Fatal(err)
		}
		n.waitFor(t, "the login's end", func() bool {
			l := list(t, c)
			return len(l) == 0 || (len(l) == 1 && l[0].State == "ESTABLISHED")
		})
		return len(listed(c, "rw", "ESTABLISHED")) == 1
	}
	// gwSA returns the gateway's IKE SA of EAP user id, or a zero one.
	gwSA := func(id string) control.IKESAInfo {
		for _, s := range listed(b, "rw", "ESTABLISHED") {
			if s.RemoteEAPID == id {
				return s
			}
		}
		return control.IKESAInfo{}
	}
	reload := func(e *endpoint, y string, unchanged int) {
		t.Helper()
		res, err := e.m.Reload(&parseYAML(t, y).IKEConfig)
		if err != nil || res != (ReloadResult{Unchanged: unchanged}) {
			t.Fatalf("reload: %+v, %v; want the connection unchanged", res, err)
		}
	}

	if !login(alice) {
		t.Fatal("alice, a user, did not log in")
	}
	aliceSA := gwSA("alice")
	if login(carol) {
		t.Fatal("carol logged in before she was a user")
	}

	reload(b, gw("  - {type: eap, ids: [alice], secret: alice-pw-1}\n  - {type: eap, ids: [carol], secret: carol-pw}\n"), 1)
	if !login(carol) {
		t.Fatal("carol, added by the reload, did not log in")
	}
	carolSA := gwSA("carol")
	if got := gwSA("alice"); got.SPIInitiator != aliceSA.SPIInitiator || got.SPIResponder != aliceSA.SPIResponder {
		t.Fatalf("alice's IKE SA %s/%s became %s/%s with the reload", aliceSA.SPIInitiator, aliceSA.SPIResponder, got.SPIInitiator, got.SPIResponder)
	}

	reload(b, gw("  - {type: eap, ids: [alice], secret: alice-pw-2}\n  - {type: eap, ids: [carol], secret: carol-pw}\n"), 1)
	if login(alice) {
		t.Fatal("alice logged in with her old password")
	}
	reload(alice, client("127.0.0.1", "10.1.1", "alice", "alice-pw-2"), 1)
	if !login(alice) {
		t.Fatal("alice did not log in with her new password")
	}
	aliceSA = gwSA("alice")
	if got := gwSA("carol"); got.SPIInitiator != carolSA.SPIInitiator || got.SPIResponder != carolSA.SPIResponder {
		t.Fatalf("carol's IKE SA %s/%s became %s/%s", carolSA.SPIInitiator, carolSA.SPIResponder, got.SPIInitiator, got.SPIResponder)
	}

	reload(b, gw("  - {type: eap, ids: [alice], secret: alice-pw-2}\n"), 1)
	if got := gwSA("carol"); got.SPIInitiator != carolSA.SPIInitiator {
		t.Fatal("carol's established IKE SA went with her user: strongSwan keeps it")
	}
	if login(carol) {
		t.Fatal("carol logged in again after she was removed")
	}
	if got := gwSA("alice"); got.SPIInitiator != aliceSA.SPIInitiator || got.SPIResponder != aliceSA.SPIResponder {
		t.Fatalf("alice's IKE SA %s/%s became %s/%s", aliceSA.SPIInitiator, aliceSA.SPIResponder, got.SPIInitiator, got.SPIResponder)
	}
}

// eapClientYAML is an EAP-MSCHAPv2 road warrior at addr (its network
// net.0/24) of gateway gw.test at 127.0.0.2, whose CA is dir/ca.pem: IKE
// identity id, EAP identity user with password pw; unique, when set, is
// its connection's, start its child's start_action.
func eapClientYAML(addr, net, id, user, pw, dir, unique, start string) string {
	if unique != "" {
		unique = "\n    unique: " + unique
	}
	return fmt.Sprintf(`interfaces:
  - {name: ipsec1, if_id: 1, addresses: [%[2]s.1/24], routes: [10.2.0.0/24]}
connections:
  - name: rw
    local_addrs: [%[1]s]
    remote_addrs: [127.0.0.2]
    proposals: [aes128gcm16-prfsha256-x25519]%[7]s
    local: {auth: eap-mschapv2, id: %[3]s, eap_id: %[4]s}
    remote: {auth: pubkey, id: gw.test, cacerts: [%[6]s/ca.pem]}
    children:
      - {name: net, if_id: 1, local_ts: [%[2]s.0/24], remote_ts: [10.2.0.0/24], esp_proposals: [aes128gcm16], start_action: %[8]s}
secrets:
  - {type: eap, ids: [%[4]s], secret: %[5]s}
`, addr, net, id, user, pw, dir, unique, start)
}
