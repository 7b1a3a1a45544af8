package daemon

import (
	"errors"
	"io"
	"os"
	"path/filepath"
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
