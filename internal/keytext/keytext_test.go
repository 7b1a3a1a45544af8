package keytext

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseHex: one set of words for a malformed key, whichever front end
// gives it, and never the key itself.
func TestParseHex(t *testing.T) {
	const digits = "000102030405060708090a0b0c0d0e0f10111213"
	for _, tt := range []struct {
		name, in, err string
		n             int
	}{
		{"ok", "0x" + digits, "", 20},
		{"upper 0X", "0X" + strings.ToUpper(digits), "", 20},
		{"no prefix", digits, "want 0x-prefixed hex", 0},
		{"odd", "0x123", "odd number of hex digits (3)", 0},
		{"not hex", "0xzz" + digits[2:], "not hex", 0},
		{"a stray last character is not hex, not an odd count", "0x" + digits + "z", "not hex", 0},
		{"empty", "0x", "", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k, err := ParseHex(tt.in)
			switch {
			case tt.err == "" && (err != nil || len(k) != tt.n):
				t.Errorf("ParseHex: %d bytes, %v; want %d bytes", len(k), err, tt.n)
			case tt.err != "" && (err == nil || err.Error() != tt.err):
				t.Errorf("ParseHex: %v, want %q", err, tt.err)
			}
			if err != nil && strings.Contains(err.Error(), digits[4:20]) {
				t.Errorf("the error shows the key: %v", err)
			}
		})
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	k, ws, err := ReadFile(write("ok.hex", "  0x0a0b0c\n", 0o600))
	if err != nil || !bytes.Equal(k, []byte{10, 11, 12}) || ws != nil {
		t.Errorf("0x, white space: %x, %q, %v; want 0a0b0c and no warning", k, ws, err)
	}
	if k, _, err := ReadFile(write("bare.hex", "0a0b", 0o600)); err != nil || !bytes.Equal(k, []byte{10, 11}) {
		t.Errorf("without 0x: %x, %v", k, err)
	}
	if _, _, err := ReadFile(write("bad.hex", "0xkey", 0o600)); err == nil || err.Error() != "the file does not hold hex (want the key as hex text, 0x optional)" {
		t.Errorf("not hex: %v", err)
	}
	if _, _, err := ReadFile(write("odd.hex", "abc", 0o600)); err == nil || err.Error() != "the file holds an odd number of hex digits (3)" {
		t.Errorf("odd: %v", err)
	}
	if _, _, err := ReadFile(dir); err == nil || !strings.Contains(err.Error(), "not a regular file (a directory)") || strings.Contains(err.Error(), dir) {
		t.Errorf("a directory: %v", err)
	}
	p := write("open.hex", "0a0b", 0o644)
	if _, ws, err := ReadFile(p); err != nil || len(ws) != 1 || !strings.Contains(ws[0], "readable by group or others (mode 0644)") {
		t.Errorf("mode 0644: %q, %v; want one warning", ws, err)
	}
}

func TestLooksLikeKey(t *testing.T) {
	for s, want := range map[string]bool{
		"rfc4106(gcm(aes))":          false,
		"0x0001020304050607":         true,
		"deadbeefdeadbee":            false, // 15 digits
		"keys/5f5e5d5c5b5a5958.hex":  true,
		"192.0.2.1:4500, 10.0.0.0/8": false,
	} {
		if got := LooksLikeKey(s); got != want {
			t.Errorf("LooksLikeKey(%q) = %v, want %v", s, got, want)
		}
	}
}
