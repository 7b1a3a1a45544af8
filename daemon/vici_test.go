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
		err := b.LoadConn("gw", tt.item)
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
