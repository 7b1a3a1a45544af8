package daemon

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	govici "github.com/strongswan/govici/vici"

	"github.com/ipsecd/ipsecd/config"
)

// TestViciFollowsTheConfig: vici: opens the socket at Start; a reload
// that moves it closes the old path and serves the new one, one that
// drops it closes it, and Stop removes it. Without IKE, list-sas lists
// nothing and version answers.
func TestViciFollowsTheConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ipsecd.yaml")
	udp := freeUDP(t)
	write := func(vici string) {
		t.Helper()
		text := "control: " + filepath.Join(dir, "ipsecd.sock") + "\nstate_dir: " + filepath.Join(dir, "state") +
			"\nunderlay: {udp: " + udp + "}\n"
		if vici != "" {
			text += "vici: " + vici + "\n"
		}
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	first, second := filepath.Join(dir, "a.vici"), filepath.Join(dir, "b.vici")
	write(first)
	log := logrus.New()
	log.SetOutput(io.Discard)
	d, stop := startFile(t, path, log)
	answers := func(sock string) {
		t.Helper()
		s, err := govici.NewSession(govici.WithSocketPath(sock))
		if err != nil {
			t.Fatalf("vici at %s: %v", sock, err)
		}
		defer s.Close()
		v, err := s.Call(t.Context(), "version", nil)
		if err != nil || v.Get("daemon") != "ipsecd" {
			t.Fatalf("version at %s: %v, %v", sock, v, err)
		}
		if _, err := s.Call(t.Context(), "list-sas", nil); err != nil {
			t.Fatalf("list-sas without IKE: %v", err)
		}
	}
	gone := func(sock string) {
		t.Helper()
		if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: %v, want it gone", sock, err)
		}
	}
	answers(first)

	write(second)
	if _, err := d.Reload(path); err != nil {
		t.Fatal(err)
	}
	gone(first)
	answers(second)

	write("")
	if _, err := d.Reload(path); err != nil {
		t.Fatal(err)
	}
	gone(second)

	write(first)
	if _, err := d.Reload(path); err != nil {
		t.Fatal(err)
	}
	answers(first)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	gone(first)
}

// TestViciLoadConnChecked: a connection loaded over vici is checked with
// the file's rules, and refused with what is wrong, without the lines of
// the document the daemon parsed it in; one named as the file's is
// refused, and so is unloading one the file has.
func TestViciLoadConnChecked(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ipsecd.yaml")
	sock := filepath.Join(dir, "v.vici")
	text := "control: " + filepath.Join(dir, "ipsecd.sock") + "\nstate_dir: " + filepath.Join(dir, "state") +
		"\nunderlay: {udp: " + freeUDP(t) + "}\nvici: " + sock + "\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	d, _ := startFile(t, path, log)
	b := d.Backend().(*backend)
	item := func(ifID, esp string) []byte {
		return []byte(`{name: "gw", remote_addrs: ["192.0.2.2"], proposals: ["aes256-sha256-x25519"], local: {auth: "psk", id: "a.test"}, ` +
			`remote: {auth: "psk", id: "b.test"}, children: [{name: "net", if_id: "` + ifID + `", local_ts: ["10.1.0.0/24"], ` +
			`remote_ts: ["10.2.0.0/24"], esp_proposals: ["` + esp + `"]}]}`)
	}
	// The file has no interfaces: no if_id can be named.
	for _, tt := range []struct {
		name string
		item []byte
		want string
	}{
		{"no interface", item("1", "aes128gcm16"), `children[0].if_id: no interface has if_id 1`},
		{"bad proposal", item("1", "rot13"), `children[0].esp_proposals[0]: proposal "rot13": unknown algorithm "rot13"`},
	} {
		err := b.LoadConn("gw", tt.item, nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "vici:") {
			t.Errorf("%s: %v; want %q without the document's lines", tt.name, err, tt.want)
		}
	}
	if err := b.LoadShared("ike-gw", []byte(`{ids: ["a.test", "b.test"], secret: "0xzz"}`)); err == nil || strings.Contains(err.Error(), "zz") {
		t.Errorf("a secret that is not hex: %v; want refused, without the secret", err)
	}
	if got := b.ViciConns(); len(got) != 0 {
		t.Errorf("refused connections were kept: %v", got)
	}
	if err := b.UnloadConn("gw"); err == nil || !strings.Contains(err.Error(), `no connection "gw" loaded over vici`) {
		t.Errorf("unloading what was never loaded: %v", err)
	}
}

// TestViciNamesClash: a connection loaded over vici may not take the
// name of the file's connections, nor a child's name the file or another
// of vici's connections has (IKE finds children by name alone); loading
// one again under its own name replaces it.
func TestViciNamesClash(t *testing.T) {
	file, err := config.Parse("f.yaml", []byte(`interfaces: [{name: ipsec1, if_id: 1}]
connections:
  - {name: file, remote_addrs: [192.0.2.9], proposals: [aes256-sha256-x25519], local: {auth: psk, id: a.test}, remote: {auth: psk, id: f.test},
     children: [{name: fnet, if_id: 1, local_ts: [10.9.0.0/24], remote_ts: [10.8.0.0/24], esp_proposals: [aes128gcm16]}]}
secrets: [{ids: [a.test], secret: x}]
`))
	if err != nil {
		t.Fatal(err)
	}
	n := &Daemon{cfg: file}
	secret := []loadedItem{{"s", []byte(`{ids: ["a.test"], secret: "0x6869"}`)}}
	parse := func(name, child string) config.Connection {
		t.Helper()
		item := `{name: "` + name + `", remote_addrs: ["192.0.2.2"], proposals: ["aes256-sha256-x25519"], local: {auth: "psk", id: "a.test"}, ` +
			`remote: {auth: "psk", id: "b.test"}, children: [{name: "` + child + `", if_id: "1", local_ts: ["10.1.0.0/24"], ` +
			`remote_ts: ["10.2.0.0/24"], esp_proposals: ["aes128gcm16"]}]}`
		cfg, err := parseVici(file.Interfaces, []loadedItem{{name, []byte(item)}}, secret, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return cfg.Connections[0]
	}
	cfg, err := parseVici(file.Interfaces, []loadedItem{{"gw", []byte(`{name: "gw", remote_addrs: ["192.0.2.2"], proposals: ["aes256-sha256-x25519"], local: {auth: "psk", id: "a.test"}, remote: {auth: "psk", id: "b.test"}, children: [{name: "net", if_id: "1", local_ts: ["10.1.0.0/24"], remote_ts: ["10.2.0.0/24"], esp_proposals: ["aes128gcm16"]}]}`)}}, secret, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	n.loaded.conns = []loadedConn{{"gw", cfg}}
	for _, tt := range []struct {
		conn config.Connection
		want string
	}{
		{parse("file", "other"), `connection "file" comes from the config file`},
		{parse("gw2", "fnet"), `child "fnet" of gw2: a child of that name comes from the config file`},
		{parse("gw2", "net"), `child "net": connection "gw" loaded over vici has a child of that name`},
		{parse("gw", "net"), ""}, // gw again: replaced
		{parse("gw2", "net2"), ""},
	} {
		err := n.clashLocked(tt.conn)
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s/%s: %v, want %q", tt.conn.Name, tt.conn.Children[0].Name, err, tt.want)
		}
	}
	// The file's connections come first in what IKE runs; vici's follow.
	var got []string
	for _, c := range n.ikeConfig(file).Connections {
		got = append(got, c.Name)
	}
	if strings.Join(got, ",") != "file,gw" {
		t.Errorf("IKE runs %v, want [file gw]", got)
	}
}
