package config

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/ike"
)

const radiusSection = `eap_radius:
  servers:
    - {name: aaa1, address: 127.0.0.1:1812, secret_file: radius.secret}
    - {address: "2001:db8::1", acct_port: 11813, secret: "another shared secret, long enough"}
  accounting: true
  accounting_interval: 5m
  nas_identifier: gw1
  retransmit_timeout: 500ms
  retransmit_tries: 3
  nas_ip: 198.51.100.1
`

// radiusConfig writes ra-good.yaml with section appended, and the
// secret file beside it.
func radiusConfig(t *testing.T, section string) string {
	t.Helper()
	path := writeConfig(t, raEdit(t, "", "")+section)
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "radius.secret"), []byte("a radius secret of 28 bytes.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestEAPRADIUSGood(t *testing.T) {
	c, err := Load(radiusConfig(t, radiusSection))
	if err != nil {
		t.Fatal(err)
	}
	e := c.EAPRADIUS
	if e == nil || len(e.Servers) != 2 {
		t.Fatalf("eap_radius: %+v", e)
	}
	s0, s1 := e.Servers[0], e.Servers[1]
	if s0.Name != "aaa1" || s0.Address != "127.0.0.1:1812" || s0.AcctAddress != "127.0.0.1:1813" || string(s0.Secret) != "a radius secret of 28 bytes." {
		t.Errorf("server 0: %s %s %s", s0.Name, s0.Address, s0.AcctAddress)
	}
	if s1.Name != "[2001:db8::1]:1812" || s1.Address != "[2001:db8::1]:1812" || s1.AcctAddress != "[2001:db8::1]:11813" {
		t.Errorf("server 1: %s %s %s", s1.Name, s1.Address, s1.AcctAddress)
	}
	if !e.Accounting || e.AccountingInterval != 5*time.Minute || e.NASIdentifier != "gw1" || e.RetransmitTimeout != 500*time.Millisecond || e.RetransmitBase != 1.4 || e.RetransmitTries != 3 {
		t.Errorf("settings %+v", *e)
	}
	cc := e.ClientConfig()
	if len(cc.Servers) != 2 || cc.Tries != 3 || cc.Timeout != 500*time.Millisecond || cc.NASIdentifier != "gw1" || cc.NASIP != netip.MustParseAddr("198.51.100.1") || cc.Servers[1].AcctAddress != "[2001:db8::1]:11813" {
		t.Errorf("ClientConfig %+v", cc)
	}
	if !strings.Contains(strings.Join(c.Warnings, "\n"), "eap_radius: no connection has remote auth eap-radius: the servers are not asked") {
		t.Errorf("warnings %q; want the one that says no connection asks RADIUS", c.Warnings)
	}
	if r := c.Redacted(); r.EAPRADIUS.Servers[0].Secret != nil || c.EAPRADIUS.Servers[0].Secret == nil {
		t.Error("Redacted kept the secret, or took it from the original")
	}
	c.WipeKeys()
	if string(s0.Secret) != strings.Repeat("\x00", len(s0.Secret)) {
		t.Error("WipeKeys left the RADIUS secret")
	}
}

func TestEAPRADIUSErrors(t *testing.T) {
	for _, tt := range []struct {
		name, old, new string
		want           string // a line of the errors, after "FILE:"
	}{
		{"no servers", "  servers:\n    - {name: aaa1, address: 127.0.0.1:1812, secret_file: radius.secret}\n    - {address: \"2001:db8::1\", acct_port: 11813, secret: \"another shared secret, long enough\"}\n", "", "31: eap_radius.servers: missing; want at least one {address, secret_file}"},
		{"no secret", ", secret_file: radius.secret}", "}", "32: eap_radius.servers[0].secret_file: missing; want secret_file: (or secret:), the shared secret"},
		{"both secrets", "secret_file: radius.secret}", "secret_file: radius.secret, secret: x}", "32: eap_radius.servers[0].secret_file: given together with secret; use one"},
		{"no such secret file", "secret_file: radius.secret}", "secret_file: nothing.secret}", "32: eap_radius.servers[0].secret_file:"},
		{"bad port", "127.0.0.1:1812", "127.0.0.1:0", `32: eap_radius.servers[0].address: port "0" is not 1..65535`},
		{"bad host", "127.0.0.1:1812", "radius..example:1812", `32: eap_radius.servers[0].address: "radius..example:1812": want an IP address or a host name`},
		{"bad acct_port", "acct_port: 11813", "acct_port: 70000", "33: eap_radius.servers[1].acct_port:"},
		{"duplicate name", `{address: "2001:db8::1",`, `{name: aaa1, address: "2001:db8::1",`, `33: eap_radius.servers[1].name: "aaa1" is already the name of eap_radius.servers[0]`},
		{"short interval", "accounting_interval: 5m", "accounting_interval: 10s", "35: eap_radius.accounting_interval: 10s is under a minute"},
		{"tries", "retransmit_tries: 3", "retransmit_tries: 11", "38: eap_radius.retransmit_tries:"},
		{"timeout", "retransmit_timeout: 500ms", "retransmit_timeout: 2m", "37: eap_radius.retransmit_timeout: 2m0s; want 10ms..60s"},
		{"base", "retransmit_tries: 3", "retransmit_base: 0.5", `38: eap_radius.retransmit_base: "0.5"; want a number from 1 to 4`},
		{"nas_ip", "nas_ip: 198.51.100.1", "nas_ip: gw1.example", "39: eap_radius.nas_ip: want an IP address"},
		{"nas_ip any", "nas_ip: 198.51.100.1", "nas_ip: 0.0.0.0", "39: eap_radius.nas_ip: 0.0.0.0; want the gateway's own unicast address"},
		{"unknown key", "nas_identifier: gw1", "nas_identifer: gw1", "36: eap_radius.nas_identifer: unknown field; did you mean nas_identifier?"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(radiusSection, tt.old) {
				t.Fatalf("the section has no %q", tt.old)
			}
			_, err := Load(radiusConfig(t, strings.Replace(radiusSection, tt.old, tt.new, 1)))
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), "ipsecd.yaml:"+tt.want) {
				t.Errorf("got:\n%v\nwant a line:\nipsecd.yaml:%s", err, tt.want)
			}
		})
	}
}

// TestEAPRADIUSShortSecret: a secret under RFC 2865's 16 bytes is
// warned about, not refused (servers of old may have one).
func TestEAPRADIUSShortSecret(t *testing.T) {
	c, err := Load(radiusConfig(t, strings.Replace(radiusSection, `"another shared secret, long enough"`, "short", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(c.Warnings, "\n"); !strings.Contains(w, "eap_radius.servers[1].secret: 5 bytes; RFC 2865 §3 asks at least 16") {
		t.Errorf("warnings:\n%s", w)
	}
}

// TestEAPRADIUSConnection: remote auth eap-radius needs eap_radius: and
// no eap secrets; with it, the engine config says eap-radius; a pool
// with radius: true needs eap_radius: too.
func TestEAPRADIUSConnection(t *testing.T) {
	gw := raGateway(t, "{auth: eap-radius}", "  []\n")
	if _, err := Parse(filepath.Join(t.TempDir(), "x.yaml"), []byte(gw)); err == nil || !strings.Contains(err.Error(), "connections[0].remote.auth: eap-radius, and no eap_radius: section: no server to relay the EAP to") {
		t.Errorf("eap-radius without eap_radius: %v", err)
	}
	section := "eap_radius: {servers: [{address: 127.0.0.1, secret: a shared secret of the test}]}\n"
	gw = strings.Replace(gw, "dns: [10.3.0.53]}", "dns: [10.3.0.53], radius: true}", 1)
	c, err := Parse(filepath.Join(t.TempDir(), "x.yaml"), []byte(gw+section))
	if err != nil {
		t.Fatal(err)
	}
	ec, err := c.EngineConfig("rw", "net")
	if err != nil || ec.RemoteAuth != ike.AuthEAPRADIUS || !c.Pools[0].RADIUS {
		t.Errorf("engine config %v, auth %s, pool radius %v; want eap-radius and true", err, ec.RemoteAuth, c.Pools[0].RADIUS)
	}
	if w := strings.Join(c.Warnings, "\n"); strings.Contains(w, "eap_radius") {
		t.Errorf("warned although a connection uses eap_radius: %s", w)
	}
}
