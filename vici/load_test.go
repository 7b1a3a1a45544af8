package vici_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	govici "github.com/strongswan/govici/vici"

	"github.com/ipsecd/ipsecd/config"
)

// fakeLoader is a fakeIKE that takes connections and secrets, keeping
// the items it was given.
type fakeLoader struct {
	fakeIKE
	conns, secrets map[string]string
	order          []string
	files          map[string][]byte // the last connection's, copied
}

func (f *fakeLoader) LoadConn(name string, item []byte, files map[string][]byte) error {
	if f.conns == nil {
		f.conns = map[string]string{}
	}
	f.files = map[string][]byte{}
	for k, v := range files {
		f.files[k] = slices.Clone(v)
	}
	f.conns[name] = string(item)
	f.order = append(f.order, name)
	return nil
}
func (f *fakeLoader) UnloadConn(name string) error {
	if _, ok := f.conns[name]; !ok {
		return fmt.Errorf("no connection %q loaded over vici", name)
	}
	delete(f.conns, name)
	return nil
}
func (f *fakeLoader) ViciConns() []string { return f.order }
func (f *fakeLoader) LoadShared(id string, item []byte) error {
	if f.secrets == nil {
		f.secrets = map[string]string{}
	}
	f.secrets[id] = string(item)
	return nil
}
func (f *fakeLoader) UnloadShared(id string) error { delete(f.secrets, id); return nil }
func (f *fakeLoader) ClearShared()                 { f.secrets = nil }
func (f *fakeLoader) SharedIDs() []string {
	var ids []string
	for id := range f.secrets {
		ids = append(ids, id)
	}
	return ids
}

// swanctlConn is a connection as swanctl sends swanctl.conf's
// connections.gw: lists split at commas, sections as they are.
func swanctlConn(t *testing.T, edit func(conn, child *govici.Message)) *govici.Message {
	t.Helper()
	child := govici.NewMessage()
	for _, kv := range []struct {
		k string
		v any
	}{
		{"local_ts", []string{"198.51.100.0/24"}}, {"remote_ts", []string{"203.0.113.0/24"}},
		{"esp_proposals", []string{"aes128gcm16"}}, {"start_action", "none"}, {"if_id_in", "1"}, {"if_id_out", "1"},
	} {
		child.Set(kv.k, kv.v)
	}
	children := govici.NewMessage()
	children.Set("net", child)
	conn := govici.NewMessage()
	local, remote := govici.NewMessage(), govici.NewMessage()
	local.Set("auth", "psk")
	local.Set("id", "a.test")
	remote.Set("auth", "psk")
	remote.Set("id", "b.test")
	for _, kv := range []struct {
		k string
		v any
	}{
		{"local_addrs", []string{"192.0.2.1"}}, {"remote_addrs", []string{"192.0.2.2"}}, {"version", "2"},
		{"proposals", []string{"aes256-sha256-x25519"}}, {"encap", "yes"}, {"rekey_time", "4h"},
		{"local", local}, {"remote", remote}, {"children", children},
	} {
		conn.Set(kv.k, kv.v)
	}
	if edit != nil {
		edit(conn, child)
	}
	m := govici.NewMessage()
	m.Set("gw", conn)
	return m
}

// TestLoadConnUnique: unique = never reaches the config file's unique
// (clients sharing an identity all stay up); no, charon's default, is
// left out; keep and replace are taken (TestConnSectionUnique: listed as
// charon lists them);
// another value is refused by the config, naming the choices.
func TestLoadConnUnique(t *testing.T) {
	f := &fakeLoader{}
	_, sess := serve(t, f, nil)
	if _, err := sess.Call(context.Background(), "load-conn", swanctlConn(t, func(c, _ *govici.Message) { c.Set("unique", "never") })); err != nil {
		t.Fatal(err)
	}
	item := f.conns["gw"]
	if !strings.Contains(item, `unique: "never"`) {
		t.Fatalf("item %s; want unique never", item)
	}
	doc := "interfaces: [{name: ipsec1, if_id: 1}]\nsecrets: [{ids: [a.test, b.test], secret: x}]\nconnections:\n  - " + item + "\n"
	cfg, err := config.Parse("vici", []byte(doc))
	if err != nil {
		t.Fatalf("the item does not parse: %v", err)
	}
	if u := cfg.Connections[0].Unique; u != config.UniqueNever {
		t.Errorf("unique %q; want never", u)
	}
	for _, u := range []config.Unique{config.UniqueKeep, config.UniqueReplace} {
		cfg, err := config.Parse("vici", []byte(strings.Replace(doc, `unique: "never"`, `unique: "`+string(u)+`"`, 1)))
		if err != nil {
			t.Fatalf("unique %s: %v", u, err)
		}
		if got := cfg.Connections[0].Unique; got != u {
			t.Errorf("unique %q; want %s", got, u)
		}
	}
	if _, err := config.Parse("vici", []byte(strings.Replace(doc, `unique: "never"`, `unique: "yes"`, 1))); err == nil || !strings.Contains(err.Error(), "want no, never, keep or replace") {
		t.Errorf("unique yes: %v; want refused by name", err)
	}
}

func TestLoadConnTranslatesSwanctlConf(t *testing.T) {
	f := &fakeLoader{}
	_, sess := serve(t, f, nil)
	// mobike = no and reauth_time = 0 say what ipsecd does: taken.
	if _, err := sess.Call(context.Background(), "load-conn", swanctlConn(t, func(c, _ *govici.Message) {
		c.Set("mobike", "no")
		c.Set("reauth_time", "0")
	})); err != nil {
		t.Fatal(err)
	}
	want := `{name: "gw", local_addrs: ["192.0.2.1"], remote_addrs: ["192.0.2.2"], version: "2", proposals: ["aes256-sha256-x25519"], ` +
		`encap: true, rekey_time: "4h", local: {auth: "psk", id: "a.test"}, remote: {auth: "psk", id: "b.test"}, ` +
		`children: [{name: "net", if_id: "1", local_ts: ["198.51.100.0/24"], remote_ts: ["203.0.113.0/24"], esp_proposals: ["aes128gcm16"], start_action: "none"}]}`
	if got := f.conns["gw"]; got != want {
		t.Fatalf("item\n got %s\nwant %s", got, want)
	}
	// The item is a connection of the config file, as the daemon
	// parses it.
	doc := "interfaces: [{name: ipsec1, if_id: 1}]\nsecrets: [{ids: [a.test, b.test], secret: x}]\nconnections:\n  - " + want + "\n"
	cfg, err := config.Parse("vici", []byte(doc))
	if err != nil {
		t.Fatalf("the item does not parse: %v", err)
	}
	if c := cfg.Connections[0]; c.Name != "gw" || !c.Encap || c.Children[0].IfID != 1 || c.RekeyTime.Hours() != 4 {
		t.Errorf("parsed %+v", c)
	}
	resp, err := sess.Call(context.Background(), "get-conns", nil)
	if err != nil || strings.Join(resp.Get("conns").([]string), ",") != "gw" {
		t.Errorf("get-conns: %v, %v; want gw", resp, err)
	}
	if _, err := sess.Call(context.Background(), "unload-conn", msg(t, "name", "gw")); err != nil {
		t.Errorf("unload-conn: %v", err)
	}
	if resp, err := sess.Call(context.Background(), "unload-conn", msg(t, "name", "gw")); err == nil {
		t.Errorf("unload-conn twice: %v", resp)
	}
}

// What ipsecd cannot do in a connection is refused by name, never
// loaded without it.
func TestLoadConnRefuses(t *testing.T) {
	_, sess := serve(t, &fakeLoader{}, nil)
	for _, tt := range []struct {
		name string
		edit func(conn, child *govici.Message)
		want string
	}{
		{"unknown key", func(c, _ *govici.Message) { c.Set("mobike", "yes") }, "gw: mobike = yes is not supported by ipsecd"},
		{"no if_id", func(_, ch *govici.Message) { ch.Unset("if_id_in"); ch.Unset("if_id_out") }, `gw: children.net: if_id_in "" and if_id_out ""`},
		{"different if_ids", func(_, ch *govici.Message) { ch.Set("if_id_out", "2") }, `if_id_in "1" and if_id_out "2"`},
		{"child key", func(_, ch *govici.Message) { ch.Set("hostaccess", "yes") }, "children.net: hostaccess is not supported"},
		{"certificates", func(c, _ *govici.Message) {
			l := govici.NewMessage()
			l.Set("auth", "pubkey")
			l.Set("certs", []string{"-----BEGIN CERTIFICATE-----"})
			c.Set("local", l)
		}, "local.certs: certificate 1: no PEM CERTIFICATE block"},
		{"remote certs", func(c, _ *govici.Message) {
			r := govici.NewMessage()
			r.Set("auth", "pubkey")
			r.Set("certs", []string{"x"})
			c.Set("remote", r)
		}, "remote.certs: certificate 1: x509: malformed certificate"},
		{"remote pubkeys", func(c, _ *govici.Message) {
			r := govici.NewMessage()
			r.Set("auth", "pubkey")
			r.Set("pubkeys", []string{"x"})
			c.Set("remote", r)
		}, "remote.pubkeys: raw public keys are not supported by ipsecd, whose IKE authenticates with X.509 certificates (RFC 7670's raw keys are not implemented); pin the peer's certificate with remote.certs"},
		{"local pubkeys", func(c, _ *govici.Message) {
			l := govici.NewMessage()
			l.Set("auth", "pubkey")
			l.Set("pubkeys", []string{"x"})
			c.Set("local", l)
		}, "local.pubkeys: raw public keys are not supported by ipsecd"},
		{"local cacerts without certs", func(c, _ *govici.Message) {
			l := govici.NewMessage()
			l.Set("auth", "pubkey")
			l.Set("cacerts", []string{"x"})
			c.Set("local", l)
		}, "local.cacerts: ipsecd picks no certificate of its own by its CA: give local.certs"},
		{"two rounds", func(c, _ *govici.Message) {
			l := govici.NewMessage()
			l.Set("auth", "eap")
			c.Set("local-2", l)
		}, "want one local section"},
		{"no children", func(c, _ *govici.Message) { c.Unset("children") }, "no children"},
		{"encap", func(c, _ *govici.Message) { c.Set("encap", "maybe") }, "encap: want yes or no"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := sess.Call(context.Background(), "load-conn", swanctlConn(t, tt.edit))
			if err == nil || !strings.Contains(fmt.Sprint(resp.Get("errmsg")), tt.want) {
				t.Fatalf("got %v, %v; want success=no saying %q", resp, err, tt.want)
			}
		})
	}
}

func TestLoadShared(t *testing.T) {
	f := &fakeLoader{}
	_, sess := serve(t, f, nil)
	m := msg(t, "id", "ike-gw", "type", "IKE", "data", "s3cr\"et\n")
	m.Set("owners", []string{"a.test", "b.test"})
	if _, err := sess.Call(context.Background(), "load-shared", m); err != nil {
		t.Fatal(err)
	}
	if got, want := f.secrets["ike-gw"], `{type: ike, ids: ["a.test","b.test"], secret: "0x73336372226574 0a"}`; got != strings.ReplaceAll(want, " 0a", "0a") {
		t.Errorf("item %s, want %s", got, want)
	}
	resp, err := sess.Call(context.Background(), "get-shared", nil)
	if err != nil || strings.Join(resp.Get("keys").([]string), ",") != "ike-gw" {
		t.Errorf("get-shared: %v %v", resp, err)
	}
	// An EAP password (swanctl's secrets.eap-*), by EAP identity.
	m = msg(t, "id", "eap-alice", "type", "EAP", "data", "pw")
	m.Set("owners", []string{"alice"})
	if _, err := sess.Call(context.Background(), "load-shared", m); err != nil {
		t.Fatal(err)
	}
	if got, want := f.secrets["eap-alice"], `{type: eap, ids: ["alice"], secret: "0x7077"}`; got != want {
		t.Errorf("item %s, want %s", got, want)
	}
	for _, typ := range []string{"XAUTH", "PRIVATE_KEY_PASS", "NTLM"} {
		resp, err := sess.Call(context.Background(), "load-shared", msg(t, "type", typ, "data", "x"))
		if err == nil || !strings.Contains(fmt.Sprint(resp.Get("errmsg")), "takes IKE pre-shared keys and EAP passwords") {
			t.Errorf("a %s secret: %v %v; want refused by name", typ, resp, err)
		}
	}
	if _, err := sess.Call(context.Background(), "clear-creds", nil); err != nil || f.secrets != nil {
		t.Errorf("clear-creds: %v, left %v", err, f.secrets)
	}
}
