//go:build linux

package main

import (
	"bytes"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseCaps(t *testing.T) {
	for _, tt := range []struct {
		list string
		want uint64
		ok   bool
	}{
		{"net_admin,net_raw", 1<<unix.CAP_NET_ADMIN | 1<<unix.CAP_NET_RAW, true},
		{"cap_net_admin, CAP_NET_RAW", 1<<unix.CAP_NET_ADMIN | 1<<unix.CAP_NET_RAW, true},
		{"net_admin", 1 << unix.CAP_NET_ADMIN, true},
		{"sys_admin", 0, false},
		{"", 0, false},
	} {
		got, err := parseCaps(tt.list)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseCaps(%q) = %#x, %v; want %#x, ok %v", tt.list, got, err, tt.want, tt.ok)
		}
	}
}

func TestEncode(t *testing.T) {
	// What setcap cap_net_admin,cap_net_raw=p writes: revision 2 without
	// the effective flag, bits 12 and 13 in the low permitted word.
	want := "00000002" + "00300000" + "00000000" + "00000000" + "00000000"
	if got := hex.EncodeToString(encode(1<<unix.CAP_NET_ADMIN | 1<<unix.CAP_NET_RAW)); got != want {
		t.Errorf("encode = %s, want %s", got, want)
	}
}

// TestSameAsSetcap writes the attribute on one file and lets setcap write
// it on another: the kernel must hold the same bytes for both.
func TestSameAsSetcap(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: writing security.capability needs root (CAP_SETFCAP)")
	}
	if _, err := exec.LookPath("setcap"); err != nil {
		t.Skip("skipping: setcap not found (Debian libcap2-bin; scripts/test.sh installs it)")
	}
	dir := t.TempDir()
	ours, theirs := filepath.Join(dir, "ours"), filepath.Join(dir, "theirs")
	for _, f := range []string{ours, theirs} {
		if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	set, err := parseCaps("net_admin,net_raw")
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(ours, xattrName, encode(set), 0); err != nil {
		t.Skipf("skipping: %s holds no security.capability here: %v", dir, err)
	}
	if out, err := exec.Command("setcap", "cap_net_admin,cap_net_raw=p", theirs).CombinedOutput(); err != nil {
		t.Fatalf("setcap: %v\n%s", err, out)
	}
	read := func(f string) []byte {
		b := make([]byte, 64)
		n, err := unix.Getxattr(f, xattrName, b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		return b[:n]
	}
	if a, b := read(ours), read(theirs); !bytes.Equal(a, b) {
		t.Errorf("security.capability: ours %x, setcap's %x", a, b)
	}
}
