package config

import (
	"crypto/ecdsa"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/internal/testpki"
)

const ikeSecret = "00112233445566778899aabbccddeeff"

func ikeGood(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("testdata/ike-good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func ikeEdit(t *testing.T, old, new string) string {
	t.Helper()
	s := ikeGood(t)
	if !strings.Contains(s, old) {
		t.Fatalf("testdata/ike-good.yaml has no %q", old)
	}
	return strings.Replace(s, old, new, 1)
}

// writeConfig writes text as ipsecd.yaml in a new directory and returns
// its path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ipsecd.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestIKEParseGood(t *testing.T) {
	c, err := Load(writeConfig(t, ikeGood(t)))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.IKE, (IKE{Port: 500, Retransmit: ike.DefaultRetransmit, CookieThreshold: 10,
		BlockThreshold: 5, InitLimitHalfOpen: 1000, MaxChildren: 4, MaxIKESAsPerPeer: 5}); got != want {
		t.Errorf("ike: got %+v, want %+v", got, want)
	}
	if len(c.Connections) != 1 || len(c.Secrets) != 1 {
		t.Fatalf("got %d connections, %d secrets, want 1, 1", len(c.Connections), len(c.Secrets))
	}
	cn := c.Connections[0]
	if cn.Name != "site-b" || cn.Version != 2 || !cn.Encap || cn.DPDDelay != 30*time.Second || cn.RekeyTime != 4*time.Hour ||
		cn.LocalAny || cn.RemoteAny || fmt.Sprint(cn.LocalAddrs, cn.RemoteAddrs) != "[192.0.2.1] [192.0.2.2]" ||
		fmt.Sprint(cn.Proposals) != "[aes256-sha256-x25519-prfsha256 aes128gcm16-prfsha256-ecp256]" ||
		cn.Local.Auth != ike.AuthPSK || cn.Local.ID != "a.example.net" || cn.Remote.ID != "b.example.net" || cn.Line != 10 {
		t.Errorf("connection: got %s", c.IKEConfig.String())
	}
	ch := cn.Children[0]
	if ch.Name != "net" || ch.IfID != 1 || ch.Transport || fmt.Sprint(ch.LocalTS, ch.RemoteTS) != "[10.10.0.0/24] [10.20.0.0/24]" ||
		fmt.Sprint(ch.ESPProposals) != "[aes128gcm16-x25519-noesn chacha20poly1305-noesn]" ||
		ch.RekeyTime != time.Hour || ch.LifeTime != 66*time.Minute || ch.ReplayWindow != 1024 ||
		ch.StartAction != StartActionStart || ch.DPDAction != DPDActionRestart || ch.Line != 21 {
		t.Errorf("child: got %+v", ch)
	}
	if got, want := c.Summary(), "1 interfaces, 0 states, 0 policies, 1 connections, 1 children, 1 secrets"; got != want {
		t.Errorf("Summary() = %q, want %q", got, want)
	}
	if got := c.String(); !strings.Contains(got, "\nconnection site-b version 2 local_addrs [192.0.2.1] remote_addrs [192.0.2.2] ") ||
		!strings.Contains(got, "\n  child net if_id 1 mode tunnel ") || !strings.Contains(got, "\nsecret ids [a.example.net b.example.net] (secret not shown)\n") {
		t.Errorf("String() = %s", got)
	}
	ec, err := c.EngineConfig("site-b", "net")
	if err != nil {
		t.Fatal(err)
	}
	if err := ec.Validate(); err != nil {
		t.Errorf("EngineConfig: Validate: %v", err)
	}
	if fmt.Sprintf("%x", ec.PSK) != ikeSecret || ec.LocalID.String() != "a.example.net" || ec.RemoteID.String() != "b.example.net" ||
		!ec.ForceEncap || ec.Retransmit != ike.DefaultRetransmit || len(ec.Proposals) != 2 || len(ec.Child.Proposals) != 2 ||
		ec.Child.Transport || ec.Child.LocalTS[0] != ch.LocalTS[0] {
		t.Errorf("EngineConfig: got %+v", ec)
	}
	if _, err := c.EngineConfig("site-b", "nope"); err == nil {
		t.Error("EngineConfig of a child that does not exist: no error")
	}
	if _, err := c.EngineConfig("nope", "net"); err == nil {
		t.Error("EngineConfig of a connection that does not exist: no error")
	}

	// Printing keeps the secret out, whatever the verb.
	for _, s := range []string{c.String(), fmt.Sprintf("%v %+v %#v %x %s", cn, cn, c.Secrets, c.Secrets[0].Secret, cn.PSK),
		c.IKEConfig.String(), fmt.Sprintf("%+v", c.Redacted().IKEConfig)} {
		if strings.Contains(strings.ToLower(s), ikeSecret) || strings.Contains(s, "\x00\x11\x22") {
			t.Errorf("printed the secret: %s", s)
		}
	}
	r := c.Redacted()
	if r.Secrets[0].Secret != nil || r.Connections[0].PSK != nil || c.Secrets[0].Secret == nil {
		t.Error("Redacted: keys left in the copy, or taken from the original")
	}

	// WipeKeys zeroes the file's secrets, not the engine's copy.
	c.WipeKeys()
	if string(c.Secrets[0].Secret) != string(make([]byte, 16)) || string(c.Connections[0].PSK) != string(make([]byte, 16)) {
		t.Error("WipeKeys left the secret")
	}
	if fmt.Sprintf("%x", ec.PSK) != ikeSecret {
		t.Error("WipeKeys zeroed the engine's copy of the PSK")
	}
}

// TestIKEUnique: unique: never, keep and replace are kept; the default
// is no.
func TestIKEUnique(t *testing.T) {
	for _, want := range []Unique{UniqueNever, UniqueKeep, UniqueReplace} {
		c, err := Load(writeConfig(t, ikeEdit(t, "encap: true", "encap: true\n    unique: "+string(want))))
		if err != nil {
			t.Fatalf("unique %s: %v", want, err)
		}
		if u := c.Connections[0].Unique; u != want {
			t.Errorf("unique %q; want %s", u, want)
		}
	}
}

func TestIKEDefaults(t *testing.T) {
	text := `
interfaces: [{name: ipsec0, if_id: 1}]
connections:
  - name: any
    remote_addrs: ["%any", 2001:db8::2]
    proposals: [aes128gcm16-prfsha256-x25519]
    local:  {id: a@example.net}
    remote: {id: "%any"}
    children:
      - {name: c, if_id: 1, local_ts: [2001:db8:1::/48], remote_ts: [2001:db8:2::/48], esp_proposals: [aes256gcm16]}
secrets:
  - {ids: [a@example.net], secret: "correct horse battery staple"}
`
	c, err := Load(writeConfig(t, text))
	if err != nil {
		t.Fatal(err)
	}
	if c.IKE.Port != 500 || c.IKE.Retransmit != ike.DefaultRetransmit || c.IKE.CookieThreshold != 10 || c.IKE.BlockThreshold != 5 ||
		c.IKE.InitLimitHalfOpen != 1000 || c.IKE.MaxChildren != ike.DefaultMaxChildren || c.IKE.MaxIKESAsPerPeer != 5 {
		t.Errorf("ike defaults: got %+v", c.IKE)
	}
	cn := c.Connections[0]
	if !cn.LocalAny || !cn.RemoteAny || len(cn.RemoteAddrs) != 1 || cn.Version != 2 || cn.RekeyTime != 4*time.Hour || cn.DPDDelay != 0 || cn.Encap || cn.Unique != UniqueNo {
		t.Errorf("connection defaults: got %+v", cn)
	}
	ch := cn.Children[0]
	if ch.RekeyTime != time.Hour || ch.LifeTime != 66*time.Minute || ch.ReplayWindow != DefaultReplayWindow ||
		ch.Transport || ch.StartAction != StartActionNone || ch.DPDAction != DPDActionClear {
		t.Errorf("child defaults: got %+v", ch)
	}
	if string(cn.PSK) != "correct horse battery staple" {
		t.Error("a text secret is not taken as it is written")
	}
}

// TestIKEErrors: each mistake is refused with FILE:LINE: field: message.
func TestIKEErrors(t *testing.T) {
	second := "\n  - name: site-b\n    proposals: [aes256-sha256-x25519]\n    local: {id: a}\n    remote: {id: b}\n" +
		"    children: [{name: net, if_id: 1, local_ts: [10.1.0.0/16], remote_ts: [10.2.0.0/16], esp_proposals: [aes128gcm16]}]\n"
	var tooMany []string
	for i := range 256 {
		tooMany = append(tooMany, fmt.Sprintf("10.20.%d.0/24", i))
	}
	tests := []struct {
		name, old, new string
		want           string // a line of the errors, after "FILE:"
	}{
		{"more ts than a TS payload holds", "remote_ts: [10.20.0.0/24]", "remote_ts: [" + strings.Join(tooMany, ", ") + "]",
			"25: connections[0].children[0].remote_ts: 256 prefixes; at most 255, what a TS payload carries"},
		{"unknown connection key", "encap: true", "encapp: true", "15: connections[0].encapp: unknown field; did you mean encap?"},
		{"unique bad", "encap: true", "unique: yes", `15: connections[0].unique: want no, never, keep or replace, got "yes"`},
		{"unknown child key", "mode: tunnel", "mod: tunnel", "23: connections[0].children[0].mod: unknown field; did you mean mode?"},
		{"unknown ike key", "port: 500", "prot: 500", "5: ike.prot: unknown field; did you mean port?"},
		{"unknown endpoint key", "{auth: psk, id: a.example.net}", "{auth: psk, id: a.example.net, certs: x}", "18: connections[0].local.certs: unknown field; did you mean cert?"},
		{"version 1", "version: 2", "version: 1", "11: connections[0].version: 1 is not supported; ipsecd speaks IKEv2 only (version: 2)"},
		{"duplicate connection", "secrets:", "" + strings.TrimPrefix(second, "\n") + "secrets:", "32: connections[1].name: \"site-b\" is already the name of connections[0]"},
		{"duplicate child", "        dpd_action: restart\n", "        dpd_action: restart\n      - {name: net, if_id: 1, local_ts: [10.10.0.0/24], remote_ts: [10.20.0.0/24], esp_proposals: [aes128gcm16]}\n",
			"32: connections[0].children[1].name: \"net\" is already the name of connections[0].children[0] (children are named by name alone, as in swanctl)"},
		{"no secret", "remote: {auth: psk, id: b.example.net}", "remote: {auth: psk, id: c.example.net}",
			"10: connections[0]: auth psk, and no item of secrets has ids matching local id \"a.example.net\" and remote id \"c.example.net\""},
		{"psk without id", "remote: {auth: psk, id: b.example.net}", "remote: {auth: psk}", "19: connections[0].remote.id: missing; auth psk needs ids on both sides, to find the secret"},
		{"if_id without interface", "if_id: 1\n        mode", "if_id: 2\n        mode", "22: connections[0].children[0].if_id: no interface has if_id 2"},
		{"if_id missing", "        if_id: 1\n", "", "21: connections[0].children[0].if_id: missing; want the if_id of the interface whose traffic the child carries"},
		{"disjoint families", "remote_addrs: [192.0.2.2]", "remote_addrs: [2001:db8::2]",
			"13: connections[0].remote_addrs: no address of the family of local_addrs: an IKE SA runs between addresses of one family"},
		{"disjoint ts families", "remote_ts: [10.20.0.0/24]", "remote_ts: [2001:db8::/32]",
			"25: connections[0].children[0].remote_ts: no prefix of the family of local_ts: no packet could match"},
		{"bad address", "local_addrs: [192.0.2.1]", "local_addrs: [192.0.2.300]", "12: connections[0].local_addrs[0]: want an IP address, got \"192.0.2.300\""},
		{"bad proposal", "aes256-sha256-x25519,", "aes256-sha265-x25519,",
			"14: connections[0].proposals[0]: proposal \"aes256-sha265-x25519\": unknown algorithm \"sha265\""},
		{"ike proposal without group", "aes128gcm16-prfsha256-ecp256]", "aes128gcm16-prfsha256]",
			"14: connections[0].proposals[1]: proposal \"aes128gcm16-prfsha256\": no key exchange group"},
		{"bad esp proposal", "chacha20poly1305]", "chacha20poly1305-prfsha256]",
			"26: connections[0].children[0].esp_proposals[1]: proposal \"chacha20poly1305-prfsha256\": a prf is for IKE proposals"},
		{"sha1 is for ESP only", "aes256-sha256-x25519,", "aes256-sha1-x25519,",
			"14: connections[0].proposals[0]: proposal \"aes256-sha1-x25519\": \"sha1\" is for ESP proposals only: IKE's own SA takes sha256, sha384 or sha512 for integrity"},
		{"ML-KEM-512", "aes256-sha256-x25519,", "aes256-sha256-x25519-ke1_mlkem512,",
			"14: connections[0].proposals[0]: proposal \"aes256-sha256-x25519-ke1_mlkem512\": \"ke1_mlkem512\": ML-KEM-512 is not implemented (Go's crypto/mlkem has ML-KEM-768 and ML-KEM-1024): use mlkem768 or mlkem1024"},
		{"additional key exchange in esp_proposals without a group", "chacha20poly1305]", "aes256gcm16-ke1_mlkem768]",
			"26: connections[0].children[0].esp_proposals[1]: proposal \"aes256gcm16-ke1_mlkem768\": additional key exchanges (keN_) come after a key exchange group for PFS (aes256gcm16-x25519-ke1_mlkem768)"},
		{"proposals missing", "    proposals: [aes256-sha256-x25519, aes128gcm16-prfsha256-ecp256]\n", "",
			"10: connections[0].proposals: missing; want IKE proposals as swanctl writes them (aes256-sha256-x25519), or a preset (aws, gcp, azure, windows, apple, android)"},
		{"esp_proposals missing", "        esp_proposals: [aes128gcm16-x25519, chacha20poly1305]\n", "",
			"21: connections[0].children[0].esp_proposals: missing; want ESP proposals as swanctl writes them (aes128gcm16-x25519), or a preset (aws, gcp, azure, windows, apple, android)"},
		{"bad duration", "dpd_delay: 30s", "dpd_delay: 30 seconds",
			"16: connections[0].dpd_delay: want a duration as swanctl writes it (30s, 66m, 4h, 1d; a bare number is seconds), got \"30 seconds\""},
		{"life_time before rekey_time", "life_time: 66m", "life_time: 30m",
			"28: connections[0].children[0].life_time: 30m0s is shorter than rekey_time (1h0m0s): the child would expire before it is rekeyed"},
		{"bad mode", "mode: tunnel", "mode: beet", "23: connections[0].children[0].mode: want tunnel or transport, got \"beet\""},
		{"bad start_action", "start_action: start", "start_action: route", "30: connections[0].children[0].start_action: want start, trap or none, got \"route\""},
		{"start to %any", "remote_addrs: [192.0.2.2]", "remote_addrs: [\"%any\"]",
			"30: connections[0].children[0].start_action: start initiates, and remote_addrs has no address to initiate to (only %any: the connection can only respond); want none, or give the peer's address"},
		{"bad dpd_action", "dpd_action: restart", "dpd_action: hold", "31: connections[0].children[0].dpd_action: want clear, restart or trap, got \"hold\""},
		{"bad auth", "local:  {auth: psk", "local:  {auth: eap-gtc", "18: connections[0].local.auth: want psk, pubkey, eap-mschapv2, eap-md5, eap-tls or eap, got \"eap-gtc\""},
		{"cert with psk", "{auth: psk, id: a.example.net}", "{auth: psk, id: a.example.net, cert: a.pem}", "18: connections[0].local.cert: only with auth: pubkey, eap-tls or eap"},
		{"pubkey without cacerts", "remote: {auth: psk,", "remote: {auth: pubkey,",
			"19: connections[0].remote.cacerts: missing; auth pubkey needs the trust anchors the peer's certificate chains to, or certs: the peer's certificate, pinned"},
		{"pinned certs with psk", "remote: {auth: psk, id: b.example.net}", "remote: {auth: psk, id: b.example.net, certs: [b.pem]}",
			"19: connections[0].remote.certs: only with auth: pubkey (the peer's certificate, pinned)"},
		{"ike port is the underlay's", "port: 500", "port: 4500",
			"5: ike.port: 4500 is underlay.udp's port, where IKE moves after NAT detection; IKE_SA_INIT needs a port of its own (500)"},
		{"bad base", "base: 1.8", "base: 0.5", "6: ike.retransmit.base: 0.5 is out of range; want 1..10"},
		{"bad tries", "tries: 5", "tries: 0", "6: ike.retransmit.tries: 0 is out of range; want 1..100"},
		{"bad block_threshold", "cookie_threshold: 10", "cookie_threshold: 10\n  block_threshold: -1", "8: ike.block_threshold: want an integer, got \"-1\""},
		{"bad init_limit_half_open", "cookie_threshold: 10", "cookie_threshold: 10\n  init_limit_half_open: 2000000", "8: ike.init_limit_half_open: 2000000 is out of range; want 0x0..0x100000"},
		{"too few children", "cookie_threshold: 10", "cookie_threshold: 10\n  max_children: 1", "8: ike.max_children: 1 is out of range; want 2..65535"},
		{"too few IKE SAs per peer", "cookie_threshold: 10", "cookie_threshold: 10\n  max_ike_sas_per_peer: 2",
			"8: ike.max_ike_sas_per_peer: 2 is too few: simultaneous IKE rekeys hold 3 for a moment; want 0 (no limit) or 3..65535"},
		{"no children", "    children:\n", "    children: []\n    x:\n",
			"20: connections[0].children: empty; a connection needs a child to carry traffic"},
		{"secret missing", `, secret: "0x00112233445566778899aabbccddeeff"}`, "}", "33: secrets[0].secret: missing; want secret: or secret_file:"},
		{"duplicate secret ids", "secrets:\n", "secrets:\n  - {ids: [b.example.net, a.example.net], secret: other}\n",
			"34: secrets[1].ids: the same ids as secrets[0]"},
		{"id with an unknown DN attribute", "remote: {auth: psk, id: b.example.net}", "remote: {auth: psk, id: \"X=1, CN=b\"}",
			"19: connections[0].remote.id: \"X=1, CN=b\": unknown attribute \"X\" in a distinguished name (want one of C, CN, DC, E, EMAIL, L, O, OU, SERIALNUMBER, SN, ST, T, UID)"},
		{"id with control characters", "remote: {auth: psk, id: b.example.net}", "remote: {auth: psk, id: \"b\\e[2J\\r\\nfake\"}",
			"19: connections[0].remote.id: b\\x1b[2J\\x0d\\x0afake has a control character or is not UTF-8"},
		{"id with bad hex", "remote: {auth: psk, id: b.example.net}", "remote: {auth: psk, id: \"@#0xz\"}",
			"19: connections[0].remote.id: \"#0xz\": want hex after #"},
		{"secret with a bad id", "secrets:\n", "secrets:\n  - {ids: [a.example.net, \"Q=1\"], secret: other}\n",
			"33: secrets[0].ids[1]: \"Q=1\": unknown attribute \"Q\" in a distinguished name (want one of C, CN, DC, E, EMAIL, L, O, OU, SERIALNUMBER, SN, ST, T, UID)"},
		{"ts with host bits", "local_ts: [10.10.0.0/24]", "local_ts: [10.10.0.1/24]",
			"24: connections[0].children[0].local_ts[0]: 10.10.0.1/24 has host bits set; did you mean 10.10.0.0/24?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, ikeEdit(t, tt.old, tt.new))
			_, err := Load(path)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains("\n"+err.Error()+"\n", "\n"+path+":"+tt.want+"\n") {
				t.Errorf("got\n%v\nwant a line\n%s:%s", err, path, tt.want)
			}
			if strings.Contains(strings.ToLower(err.Error()), ikeSecret) {
				t.Errorf("the error holds the secret:\n%v", err)
			}
		})
	}
}

// TestIKESecretNotEchoed: a malformed secret, or a secret in the wrong
// field, is refused with an error that names the field, never the value.
func TestIKESecretNotEchoed(t *testing.T) {
	const text = "hunter2-correct-horse"
	tests := []struct{ name, new, want string }{
		{"bad hex", `secret: "0x` + text + `"`, "33: secrets[0].secret: 0x but not hex (the value is not shown)"},
		{"bad base64", `secret: "0s` + text + `!"`, "33: secrets[0].secret: 0s but not base64 (the value is not shown)"},
		{"secret and secret_file", `secret: "` + text + `", secret_file: ` + text, "33: secrets[0].secret_file: given together with secret; use one"},
		{"secret as secret_file", `secret_file: "` + text + `"`, "33: secrets[0].secret_file: no such file or directory"},
		{"secret as a list", `secret: [` + text + `]`, "33: secrets[0].secret: want a string, got a list"},
		{"empty", `secret: ""`, "33: secrets[0].secret: empty (the value is not shown)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, ikeEdit(t, `secret: "0x`+ikeSecret+`"`, tt.new))
			_, err := Load(path)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), path+":"+tt.want) {
				t.Errorf("got\n%v\nwant %s:%s", err, path, tt.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error holds the secret:\n%v", err)
			}
		})
	}
}

func TestIKEDurations(t *testing.T) {
	for in, want := range map[string]time.Duration{"30s": 30 * time.Second, "66m": 66 * time.Minute, "4h": 4 * time.Hour,
		"1d": 24 * time.Hour, "90": 90 * time.Second, "1.5s": 1500 * time.Millisecond, "500ms": 500 * time.Millisecond} {
		c, err := Load(writeConfig(t, ikeEdit(t, "dpd_delay: 30s", "dpd_delay: "+in)))
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if got := c.Connections[0].DPDDelay; got != want {
			t.Errorf("%s: got %s, want %s", in, got, want)
		}
	}
	for _, in := range []string{"-1s", "4 h", "1w", "h", "1e9h", "99999999999999d"} {
		if _, err := Load(writeConfig(t, ikeEdit(t, "dpd_delay: 30s", "dpd_delay: "+in))); err == nil {
			t.Errorf("%s: accepted", in)
		}
	}
}

// TestIKESecretFile: secret_file is read with the bounded reader, written
// as secret: writes it; a file others can read gets a warning; a FIFO or
// an oversized file is refused.
func TestIKESecretFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ipsecd.yaml")
	text := ikeEdit(t, `secret: "0x`+ikeSecret+`"`, "secret_file: site-b.psk")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	psk := filepath.Join(dir, "site-b.psk")
	if err := os.WriteFile(psk, []byte("0s"+"ABEiM0RVZneImaq7zN3u/w=="+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%x", []byte(c.Connections[0].PSK)); got != ikeSecret {
		t.Errorf("secret from the file: got %s, want %s", got, ikeSecret)
	}
	want := "secret_file " + psk + " is readable by group or others (mode 0644): run chmod 600 " + psk
	if strings.Join(c.Warnings, "\n") != want {
		t.Errorf("warnings: got %q, want %q", c.Warnings, want)
	}
	if err := os.Chmod(psk, 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := Load(path); err != nil || len(c.Warnings) != 0 {
		t.Errorf("mode 0600: got %v, warnings %q", err, c.Warnings)
	}

	if err := os.WriteFile(psk, []byte(strings.Repeat("a", maxKeyFile+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "secrets[0].secret_file: 4097 bytes: a secret file may have at most 4096") {
		t.Errorf("oversized: got %v", err)
	}
	os.Remove(psk)
	if err := syscall.Mkfifo(psk, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "secrets[0].secret_file: not a regular file (a FIFO)") {
		t.Errorf("FIFO: got %v", err)
	}
}

// TestIKEKeylogWarned: keylog is accepted and loudly warned about.
func TestIKEKeylogWarned(t *testing.T) {
	c, err := Load(writeConfig(t, ikeEdit(t, `keylog: ""`, "keylog: /tmp/ipsecd-keys")))
	if err != nil {
		t.Fatal(err)
	}
	if c.IKE.Keylog != "/tmp/ipsecd-keys" || !strings.Contains(strings.Join(c.Warnings, "\n"), "ike.keylog writes every negotiated IKE and ESP key to /tmp/ipsecd-keys*") {
		t.Errorf("keylog %q, warnings %q", c.IKE.Keylog, c.Warnings)
	}
}

// TestIKEResolveFile: resolve_file is read, relative to the config's
// directory.
func TestIKEResolveFile(t *testing.T) {
	path := writeConfig(t, ikeEdit(t, `keylog: ""`, "resolve_file: resolv.conf"))
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(filepath.Dir(path), "resolv.conf"); c.IKE.ResolveFile != want {
		t.Errorf("resolve_file %q, want %q", c.IKE.ResolveFile, want)
	}
}

func TestBestSecret(t *testing.T) {
	secret := func(ids ...string) Secret {
		s := Secret{IDs: ids}
		for _, id := range ids {
			s.Identities = append(s.Identities, ike.MustParseIdentity(id))
		}
		return s
	}
	secrets := []Secret{secret(), secret("a"), secret("a", "b"), secret("x", "y"), secret("192.0.2.1", "@gw")}
	tests := []struct {
		local, remote string
		want          int
	}{
		{"a", "b", 2}, {"b", "a", 2}, {"a", "c", 1}, {"c", "a", 1}, {"c", "d", 0}, {"a", "%any", 1}, {"x", "y", 3},
		{"gw", "192.0.2.1", 4}, {"fqdn:gw", "ipv4:192.0.2.1", 4}, {"gw", "fqdn:192.0.2.1", 0},
	}
	for _, tt := range tests {
		if got := bestSecret(secrets, ike.MustParseIdentity(tt.local), ike.MustParseIdentity(tt.remote)); got != tt.want {
			t.Errorf("%s, %s: got secrets[%d], want secrets[%d]", tt.local, tt.remote, got, tt.want)
		}
	}
	if got := bestSecret(secrets[1:2], ike.MustParseIdentity("c"), ike.MustParseIdentity("d")); got != -1 {
		t.Errorf("no match: got %d, want -1", got)
	}
}

// pki writes a CA and a leaf certificate for gw.example.net with their keys
// into dir, and returns the paths.
func pki(t *testing.T, dir string) (caPath, certPath, keyPath, otherKeyPath string) {
	t.Helper()
	return pkiFor(t, dir, "gw.example.net")
}

// pkiFor is pki with the certificate's name: ca.pem, gw.pem (for name),
// gw.key (SEC1) and other.key, a key of no certificate (PKCS#8).
func pkiFor(t *testing.T, dir, name string) (caPath, certPath, keyPath, otherKeyPath string) {
	t.Helper()
	ca := testpki.NewCA(t, "Test CA", testpki.Opts{})
	gw := ca.Issue(t, name, testpki.Opts{})
	other := ca.Issue(t, "other", testpki.Opts{})
	return ca.WriteCert(t, filepath.Join(dir, "ca.pem")), gw.WriteCert(t, filepath.Join(dir, "gw.pem")),
		gw.WriteKey(t, filepath.Join(dir, "gw.key"), testpki.SEC1), other.WriteKey(t, filepath.Join(dir, "other.key"), testpki.PKCS8)
}

// TestIKECertificates: cert, key and cacerts are read and checked as the
// engine checks them (the key is the certificate's, the certificate
// proves the id).
func TestIKECertificates(t *testing.T) {
	dir := t.TempDir()
	pki(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "junk.pem"), []byte("not PEM\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	load := func(local, remote string) (*Config, error) {
		text := ikeEdit(t, "local:  {auth: psk, id: a.example.net}", "local:  "+local)
		text = strings.Replace(text, "remote: {auth: psk, id: b.example.net}", "remote: "+remote, 1)
		path := filepath.Join(dir, "ipsecd.yaml")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return Load(path)
	}
	c, err := load("{auth: pubkey, id: gw.example.net, cert: gw.pem, key: gw.key}", "{auth: pubkey, cacerts: [ca.pem]}")
	if err != nil {
		t.Fatal(err)
	}
	cn := c.Connections[0]
	if len(cn.Local.Certs) != 1 || cn.Local.PrivateKey == nil || len(cn.Remote.CACertList) != 1 || cn.PSK != nil ||
		cn.Local.Cert != filepath.Join(dir, "gw.pem") {
		t.Errorf("got %+v", cn)
	}
	ec, err := c.EngineConfig("site-b", "net")
	if err != nil || ec.Validate() != nil || ec.PrivateKey == nil || len(ec.CACerts) != 1 {
		t.Errorf("EngineConfig: %v", err)
	}
	d := cn.Local.PrivateKey.(*ecdsa.PrivateKey).D
	if s := fmt.Sprintf("%v %+v %#v", cn, cn, cn.Local); strings.Contains(s, d.String()) || strings.Contains(s, d.Text(16)) {
		t.Errorf("printed the private key: %s", s)
	}
	c.WipeKeys()
	if c.Connections[0].Local.PrivateKey != nil {
		t.Error("WipeKeys left the private key")
	}
	// The peer's certificate pinned (remote certs), alone or with its CA.
	for _, remote := range []string{"{auth: pubkey, id: gw.example.net, certs: [gw.pem]}", "{auth: pubkey, certs: [gw.pem], cacerts: [ca.pem]}"} {
		c, err := load("{auth: pubkey, id: gw.example.net, cert: gw.pem, key: gw.key}", remote)
		if err != nil {
			t.Fatalf("%s: %v", remote, err)
		}
		ec, err := c.EngineConfig("site-b", "net")
		if err != nil || ec.Validate() != nil || len(ec.PeerCerts) != 1 || !ec.PeerCerts[0].Equal(c.Connections[0].Local.Certs[0]) {
			t.Errorf("%s: EngineConfig %v, PeerCerts %d", remote, err, len(ec.PeerCerts))
		}
		if !strings.Contains(c.Connections[0].Remote.String(), "certs: ["+filepath.Join(dir, "gw.pem")+"]") {
			t.Errorf("%s: %s", remote, c.Connections[0].Remote)
		}
	}

	tests := []struct{ name, local, remote, want string }{
		{"wrong key", "{auth: pubkey, cert: gw.pem, key: other.key}", "{auth: pubkey, cacerts: [ca.pem]}",
			"10: connections[0]: the private key is not the key of the local certificate"},
		{"id not proven", "{auth: pubkey, id: other.example.net, cert: gw.pem, key: gw.key}", "{auth: pubkey, cacerts: [ca.pem]}",
			"10: connections[0]: local id \"other.example.net\" is neither the subject nor a subjectAltName of the local certificate (CN=gw.example.net)"},
		{"missing cert", "{auth: pubkey, cert: nope.pem, key: gw.key}", "{auth: pubkey, cacerts: [ca.pem]}",
			"18: connections[0].local.cert: open " + filepath.Join(dir, "nope.pem") + ": no such file or directory"},
		{"junk cert", "{auth: pubkey, cert: junk.pem, key: gw.key}", "{auth: pubkey, cacerts: [ca.pem]}",
			"18: connections[0].local.cert: " + filepath.Join(dir, "junk.pem") + ": no PEM CERTIFICATE block"},
		{"junk key", "{auth: pubkey, cert: gw.pem, key: junk.pem}", "{auth: pubkey, cacerts: [ca.pem]}",
			"18: connections[0].local.key: no PEM private key block (RSA PRIVATE KEY, EC PRIVATE KEY or PRIVATE KEY)"},
		{"private key pasted as key", "{auth: pubkey, cert: gw.pem, key: MHcCAQEEIBbase64keymaterial}", "{auth: pubkey, cacerts: [ca.pem]}",
			"18: connections[0].local.key: no such file or directory"},
		{"junk cacert", "{auth: pubkey, cert: gw.pem, key: gw.key}", "{auth: pubkey, cacerts: [ca.pem, junk.pem]}",
			"19: connections[0].remote.cacerts[1]: " + filepath.Join(dir, "junk.pem") + ": no PEM CERTIFICATE block"},
		{"pinned certificate of another id", "{auth: pubkey, cert: gw.pem, key: gw.key}", "{auth: pubkey, id: b.example.net, certs: [gw.pem]}",
			"19: connections[0].remote.certs: no certificate of them proves id \"b.example.net\" (its subject or a subjectAltName): the peer could never authenticate"},
		{"key missing", "{auth: pubkey, cert: gw.pem}", "{auth: pubkey, cacerts: [ca.pem]}",
			"18: connections[0].local: auth pubkey needs cert: and key: (the certificate and its private key)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(tt.local, tt.remote)
			if err == nil {
				t.Fatal("accepted")
			}
			if want := filepath.Join(dir, "ipsecd.yaml") + ":" + tt.want; !strings.Contains("\n"+err.Error()+"\n", "\n"+want+"\n") {
				t.Errorf("got\n%v\nwant a line\n%s", err, want)
			}
			if strings.Contains(err.Error(), "base64keymaterial") {
				t.Errorf("the error shows what key: holds, which may be a pasted key:\n%v", err)
			}
		})
	}
}

// FuzzParseIKE feeds Parse variations of a file with connections: it must
// never panic, must return exactly one of a Config and an error, and an
// error never holds the hex secret of the seed.
func FuzzParseIKE(f *testing.F) {
	good, err := os.ReadFile("testdata/ike-good.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	if ra, err := os.ReadFile("testdata/ra-good.yaml"); err == nil {
		f.Add(ra)
	}
	f.Add([]byte("connections: [{name: a, children: [{name: a}]}]\nsecrets: [{secret: \"0x" + ikeSecret + "\"}]\n"))
	f.Add([]byte("ike: {retransmit: {timeout: 1.5s, base: 1e308}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data)
		if (c == nil) == (err == nil) {
			t.Fatalf("Parse returned config %v and error %v", c != nil, err)
		}
		if err != nil && strings.Contains(strings.ToLower(err.Error()), ikeSecret) {
			t.Fatalf("the error holds the secret:\n%v", err)
		}
	})
}
