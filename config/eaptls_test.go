package config

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/ike"
)

// TestEAPTLSConfig: remote auth eap-tls (the users' CAs, no eap secrets)
// and local auth eap-tls (our certificate inside EAP, the gateway's CAs)
// become the engine's config, and local auth eap (EAP-only) a gateway's
// with a mutual method; what each needs and lacks is named by field.
func TestEAPTLSConfig(t *testing.T) {
	dir := t.TempDir()
	ca, _, _, _ := pki(t, dir)
	carolCA, carol, carolKey, _ := pkiFor(t, t.TempDir(), "carol.example.net")
	gw := func(local, remote string) string {
		text := raGateway(t, remote, "")
		return strings.Replace(text, "local:  {auth: pubkey,", "local:  {auth: "+local+",", 1)
	}
	c, err := Parse(filepath.Join(dir, "x.yaml"), []byte(gw("pubkey", "{auth: eap-tls, cacerts: ["+carolCA+"]}")))
	if err != nil {
		t.Fatal(err)
	}
	if ec, _ := c.EngineConfig("rw", "net"); ec.RemoteAuth != ike.AuthEAPTLS || len(ec.CACerts) != 1 {
		t.Errorf("gateway: remote auth %s, %d CAs", ec.RemoteAuth, len(ec.CACerts))
	}
	if _, err := Parse(filepath.Join(dir, "x.yaml"), []byte(gw("eap", "{auth: eap-tls, cacerts: ["+carolCA+"]}"))); err != nil {
		t.Errorf("EAP-only gateway of EAP-TLS: %v", err)
	}
	client := raClient(t, "{auth: eap-tls, id: carol.example.net, cert: "+carol+", key: "+carolKey+"}", "{auth: pubkey, id: gw.example.net, cacerts: ["+ca+"]}", "")
	c, err = Parse(filepath.Join(dir, "x.yaml"), []byte(client))
	if err != nil {
		t.Fatal(err)
	}
	if ec, _ := c.EngineConfig("rw", "net"); ec.LocalAuth != ike.AuthEAPTLS || len(ec.LocalCerts) != 1 || ec.PrivateKey == nil || len(ec.CACerts) != 1 {
		t.Errorf("client: local auth %s, %d certificates, key %v, %d CAs", ec.LocalAuth, len(ec.LocalCerts), ec.PrivateKey != nil, len(ec.CACerts))
	}
	alice := "  - {type: eap, ids: [alice], secret: alice-pw}\n"
	for _, tt := range []struct{ name, text, want string }{
		{"gateway without cacerts", gw("pubkey", "{auth: eap-tls}"), "connections[0].remote.cacerts: missing; auth eap-tls needs the trust anchors the peer's certificate chains to"},
		{"client without key", raClient(t, "{auth: eap-tls, id: carol.example.net, cert: "+carol+"}", "", ""), "connections[0].local: auth eap-tls needs cert: and key:"},
		{"client without cacerts", raClient(t, "{auth: eap-tls, id: carol.example.net, cert: "+carol+", key: "+carolKey+"}", "{auth: eap, id: gw.example.net}", ""),
			"connections[0].remote.cacerts: missing; local auth eap-tls needs the trust anchors of the gateway's TLS certificate"},
		{"client's certificate not naming it", raClient(t, "{auth: eap-tls, id: dave.example.net, cert: "+carol+", key: "+carolKey+"}", "", ""),
			`the EAP identity "dave.example.net" is neither the subject nor a subjectAltName of the local certificate`},
		{"EAP-only with md5", gw("eap", "{auth: eap-md5}"), "connections[0].remote.auth: eap-md5: local auth eap (EAP-only, RFC 5998) needs a method that proves us to the client"},
		{"EAP-only with radius", gw("eap", "{auth: eap-radius}"), "connections[0].remote.auth: eap-radius: local auth eap (EAP-only, RFC 5998) needs a method"},
		{"EAP-only TLS without cert", regexp.MustCompile(`, cert: [^,]*, key: [^}]*`).ReplaceAllString(gw("eap", "{auth: eap-tls, cacerts: ["+carolCA+"]}"), ""),
			"connections[0].local.cert: missing; local auth eap with remote auth eap-tls needs cert: and key:"},
		{"client EAP-only with md5", raClient(t, "{auth: eap-md5, eap_id: alice}", "{auth: eap, id: gw.example.net}", alice),
			"connections[0].remote.auth: eap: EAP-only authentication needs a method that proves the gateway (eap-mschapv2, eap-tls); local auth eap-md5 does not"},
		{"cacerts with psk", raClient(t, "{auth: psk, id: carol.example.net}", "{auth: psk, id: gw.example.net, cacerts: ["+ca+"]}", "  - {ids: [carol.example.net, gw.example.net], secret: k}\n"),
			"connections[0].remote.cacerts: only with auth: pubkey, eap-tls or eap"},
	} {
		_, err := Parse(filepath.Join(t.TempDir(), "x.yaml"), []byte(tt.text))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}
