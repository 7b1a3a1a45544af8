package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeMode writes content to path and sets its mode exactly (umask does
// not apply to chmod).
func writeMode(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// TestKeyPermissionWarnings: Load warns about a config file that holds
// keys, or a key_file, that group or others can read, naming the file and
// its mode, once per file; it accepts the file all the same, and says
// nothing about files only their owner can read, or a readable config
// file that holds no key.
func TestKeyPermissionWarnings(t *testing.T) {
	const keyHex = "000102030405060708090a0b0c0d0e0f10111213"
	// The second state's auth key stays inline unless the case moves it.
	inlineAuth := `key: "0x` + strings.Repeat("ab", 32) + `"`
	tests := []struct {
		name      string
		mainMode  os.FileMode
		keyMode   os.FileMode // 0: the aead key is inline
		authFile  bool        // the auth key in a key_file too (the main file holds none)
		wantMain  bool
		wantKey   bool
		wantCount int
	}{
		{name: "all 0600", mainMode: 0o600, keyMode: 0o600, wantCount: 0},
		{name: "inline keys, 0600", mainMode: 0o600, wantCount: 0},
		{name: "inline keys, 0644", mainMode: 0o644, wantMain: true, wantCount: 1},
		{name: "inline keys, 0640 (group)", mainMode: 0o640, wantMain: true, wantCount: 1},
		{name: "inline keys, 0604 (others)", mainMode: 0o604, wantMain: true, wantCount: 1},
		{name: "inline keys, 0700", mainMode: 0o700, wantCount: 0},
		{name: "key_file 0644", mainMode: 0o600, keyMode: 0o644, wantKey: true, wantCount: 1},
		{name: "key_file 0640", mainMode: 0o600, keyMode: 0o640, wantKey: true, wantCount: 1},
		{name: "no inline key, main 0644, key files 0600", mainMode: 0o644, keyMode: 0o600, authFile: true, wantCount: 0},
		{name: "no inline key, main 0644, key files 0644", mainMode: 0o644, keyMode: 0o644, authFile: true, wantKey: true, wantCount: 2},
		{name: "both", mainMode: 0o644, keyMode: 0o644, wantMain: true, wantKey: true, wantCount: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "ipsecd.yaml")
			keyPath := filepath.Join(dir, "gcm.key")
			authPath := filepath.Join(dir, "auth.key")
			text := good
			if tt.keyMode != 0 {
				writeMode(t, keyPath, "0x"+keyHex+"\n", tt.keyMode)
				text = strings.Replace(text, `key: "`+gcmKey+`"`, "key_file: gcm.key", 1)
			}
			if tt.authFile {
				writeMode(t, authPath, strings.Repeat("ab", 32), tt.keyMode)
				text = strings.Replace(text, inlineAuth, "key_file: auth.key", 1)
			}
			writeMode(t, path, text, tt.mainMode)
			c, err := Load(path)
			if err != nil {
				t.Fatalf("Load: %v (warnings must not refuse the file)", err)
			}
			if len(c.Warnings) != tt.wantCount {
				t.Errorf("%d warnings, want %d: %q", len(c.Warnings), tt.wantCount, c.Warnings)
			}
			if tt.wantMain {
				want := fmt.Sprintf("%s holds keys and is readable by group or others (mode %04o): run chmod 600 %s", path, tt.mainMode, path)
				if len(c.Warnings) == 0 || !strings.HasPrefix(c.Warnings[0], want) {
					t.Errorf("warnings %q, want the first to start %q", c.Warnings, want)
				}
			}
			if tt.wantKey {
				want := fmt.Sprintf("key_file %s is readable by group or others (mode %04o): run chmod 600 %s", keyPath, tt.keyMode, keyPath)
				if !slices.Contains(c.Warnings, want) {
					t.Errorf("warnings %q, want %q", c.Warnings, want)
				}
			}
			for _, w := range c.Warnings {
				if strings.Contains(strings.ToLower(w), keyHex[:16]) || strings.Contains(w, strings.Repeat("ab", 8)) {
					t.Errorf("warning %q shows key material", w)
				}
			}
		})
	}

	// Parse alone (no file of its own to stat) warns about key files
	// only. (Two states cannot share a key_file: that is key reuse.)
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "gcm.key")
	writeMode(t, keyPath, "0x"+keyHex, 0o644)
	text := strings.Replace(good, `key: "`+gcmKey+`"`, "key_file: gcm.key", 1)
	c, err := Parse(filepath.Join(dir, "ipsecd.yaml"), []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], keyPath) {
		t.Errorf("a 0644 key_file: warnings %q, want one naming %s", c.Warnings, keyPath)
	}
}

// TestWipeKeys: WipeKeys zeroes every key of the config in place, and a
// nil Config is fine.
func TestWipeKeys(t *testing.T) {
	c, err := Parse("good.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	keys := [][]byte{c.States[0].AEAD.Key, c.States[1].Auth.Key}
	for _, k := range keys {
		if len(k) == 0 || isAllZero(k) {
			t.Fatalf("parsed key %x: want non-zero bytes", k)
		}
	}
	c.WipeKeys()
	for i, k := range keys {
		if !isAllZero(k) {
			t.Errorf("key %d after WipeKeys: %x, want zeroes", i, k)
		}
	}
	(*Config)(nil).WipeKeys()
}

func isAllZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// TestKeyWriteWarnings: Load warns about a config file or a key_file that
// group or others can write, or that a user other than the one running
// ipsecd (or root) owns: whoever can change them chooses the keys. The
// config file is warned about whether or not it holds keys itself (its
// key_file entries choose them too). Files only their owner can write,
// owned by the user running ipsecd, get no warning.
func TestKeyWriteWarnings(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files to another user (chown)")
	}
	const nobody = 65534
	const keyHex = "000102030405060708090a0b0c0d0e0f10111213"
	tests := []struct {
		name      string
		mainMode  os.FileMode
		keyMode   os.FileMode
		mainOwner int // 0: the file stays ours
		keyOwner  int
		want      []string // %[1]s is the config file, %[2]s the key_file
	}{
		{name: "all 0600, ours", mainMode: 0o600, keyMode: 0o600},
		{name: "key_file group-writable", mainMode: 0o600, keyMode: 0o620,
			want: []string{"key_file %[2]s is writable by group or others (mode 0620), who can change the keys: run chmod go-w %[2]s"}},
		{name: "key_file others-writable", mainMode: 0o600, keyMode: 0o602,
			want: []string{"key_file %[2]s is writable by group or others (mode 0602)"}},
		{name: "key_file 0666", mainMode: 0o600, keyMode: 0o666,
			want: []string{"key_file %[2]s is readable by group or others (mode 0666)", "key_file %[2]s is writable by group or others (mode 0666)"}},
		{name: "config file writable, no inline key", mainMode: 0o660, keyMode: 0o600,
			want: []string{"%[1]s is writable by group or others (mode 0660), who can change the keys: run chmod go-w %[1]s"}},
		{name: "key_file of another user", mainMode: 0o600, keyMode: 0o600, keyOwner: nobody,
			want: []string{"key_file %[2]s is owned by uid 65534, not by uid 0 that runs ipsecd, nor by root: that user can change the keys: run chown 0 %[2]s"}},
		{name: "config file of another user", mainMode: 0o600, keyMode: 0o600, mainOwner: nobody,
			want: []string{"%[1]s is owned by uid 65534, not by uid 0 that runs ipsecd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "ipsecd.yaml")
			keyPath := filepath.Join(dir, "gcm.key")
			writeMode(t, keyPath, "0x"+keyHex+"\n", tt.keyMode)
			// The second state's inline auth key moves to a file of its own, 0600.
			authPath := filepath.Join(dir, "auth.key")
			writeMode(t, authPath, strings.Repeat("ab", 32), 0o600)
			text := strings.Replace(good, `key: "`+gcmKey+`"`, "key_file: gcm.key", 1)
			text = strings.Replace(text, `key: "0x`+strings.Repeat("ab", 32)+`"`, "key_file: auth.key", 1)
			writeMode(t, path, text, tt.mainMode)
			for _, o := range []struct {
				path string
				uid  int
			}{{path, tt.mainOwner}, {keyPath, tt.keyOwner}} {
				if o.uid != 0 {
					if err := os.Chown(o.path, o.uid, -1); err != nil {
						t.Fatal(err)
					}
				}
			}
			c, err := Load(path)
			if err != nil {
				t.Fatalf("Load: %v (warnings must not refuse the file)", err)
			}
			if len(c.Warnings) != len(tt.want) {
				t.Errorf("%d warnings, want %d: %q", len(c.Warnings), len(tt.want), c.Warnings)
			}
			for _, w := range tt.want {
				w = fmt.Sprintf(w, path, keyPath)
				if !slices.ContainsFunc(c.Warnings, func(got string) bool { return strings.HasPrefix(got, w) }) {
					t.Errorf("warnings %q, want one starting %q", c.Warnings, w)
				}
			}
		})
	}
}
