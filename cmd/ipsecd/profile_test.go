package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// profileConfig is a gateway with one PSK connection for road warriors.
const profileConfig = `underlay: {udp: "0.0.0.0:4500"}
interfaces:
  - {name: ipsec1, if_id: 1, addresses: [198.51.100.1/24]}
connections:
  - name: office
    local_addrs: [192.0.2.1]
    proposals: [aes256-sha256-modp2048]
    local:  {auth: psk, id: gw.example.net}
    remote: {auth: psk, id: alice@example.net}
    children:
      - {name: net, if_id: 1, local_ts: [198.51.100.0/24], remote_ts: [203.0.113.0/24], esp_proposals: [aes256gcm16]}
secrets:
  - {ids: [gw.example.net, alice@example.net], secret: "a test psk"}
`

// TestProfileCommand: ipsecd profile writes to stdout or, with --out, a
// file (apple, windows) or a swanctl directory (strongswan), 0600; a
// profile the client cannot have fails with the reason (exit 1), a
// missing flag or an unknown kind is a usage error (exit 2).
func TestProfileCommand(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ipsecd.yaml")
	if err := os.WriteFile(cfg, []byte(profileConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args       []string
		code       int
		out, err   string
		file, want string // a file --out wrote, and a line of it
	}{
		{[]string{"profile", "apple", "--config", cfg, "--connection", "office", "--user", "alice@example.net"}, 0,
			"<string>SharedSecret</string>", "", "", ""},
		{[]string{"profile", "strongswan", "--config", cfg, "--connection", "office", "--user", "alice@example.net"}, 0,
			`secret = "a test psk"`, "", "", ""},
		{[]string{"profile", "strongswan", "--config", cfg, "--connection", "office", "--user", "alice@example.net", "--out", filepath.Join(dir, "swanctl")}, 0,
			"", "", "swanctl/swanctl.conf", "\t\tremote_addrs = \"192.0.2.1\"\n"},
		{[]string{"profile", "apple", "--config", cfg, "--connection", "office", "--user", "alice@example.net", "--address", "vpn.example.net", "--out", filepath.Join(dir, "a.mobileconfig")}, 0,
			"", "", "a.mobileconfig", "<string>vpn.example.net</string>"},
		{[]string{"profile", "windows", "--config", cfg, "--connection", "office", "--user", "alice@example.net"}, 1,
			"", "windows: connection office: local.auth psk: Windows' IKEv2 client checks the gateway's certificate (pubkey); it takes no pre-shared key", "", ""},
		{[]string{"profile", "apple", "--config", cfg, "--connection", "office", "--user", "alice@example.net", "--ca", cfg}, 1, "", "ipsecd.yaml: no PEM certificate", "", ""},
		{[]string{"profile", "apple", "--config", cfg, "--connection", "office"}, 2, "", "--connection NAME and --user ID are required", "", ""},
		{[]string{"profile", "android", "--config", cfg}, 2, "", `unknown profile command "android"; want apple, windows, strongswan`, "", ""},
		{[]string{"profile", "windows", "--config", cfg, "--connection", "office", "--user", "a", "--p12", cfg}, 2, "", "--p12 is for apple profiles", "", ""},
	} {
		var o, e bytes.Buffer
		if code := run(tc.args, &o, &e); code != tc.code || !strings.Contains(o.String(), tc.out) || !strings.Contains(e.String(), tc.err) {
			t.Errorf("%v: exit %d, want %d\nstdout: %s\nstderr: %s\nwant %q and %q", tc.args[1:3], code, tc.code, o.String(), e.String(), tc.out, tc.err)
			continue
		}
		if tc.file == "" {
			continue
		}
		path := filepath.Join(dir, tc.file)
		b, err := os.ReadFile(path)
		if err != nil || !strings.Contains(string(b), tc.want) {
			t.Errorf("%s: %v; want a line %q in\n%s", tc.file, err, tc.want, b)
		}
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", tc.file, st.Mode())
		}
	}
}
