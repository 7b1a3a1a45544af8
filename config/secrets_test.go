package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pasted is key material pasted into the wrong field, and parts of it an
// error message must not hold either.
const pasted = "0x5f5e5d5c5b5a595857565554535251504f4e4d4c"

func holdsPasted(s string) bool {
	s = strings.ToLower(s)
	for _, part := range []string{pasted[2:], pasted[2:18], pasted[26:42]} {
		if strings.Contains(s, part) {
			return true
		}
	}
	return false
}

// TestPastedKeyNotEchoed: key material pasted into the wrong field (a
// key_file, an algorithm name, the bits, the algorithm itself, a field
// name) or a malformed key is refused with an error that names the field
// and never holds the value.
func TestPastedKeyNotEchoed(t *testing.T) {
	inlineAuth := `key: "0x` + strings.Repeat("ab", 32) + `"`
	tests := []struct {
		name, old, new string
		want           string // the start of the first error line, after "FILE:"
	}{
		{"key in key_file", `key: "` + gcmKey + `"`, `key_file: "` + pasted + `"`, "22: states[0].aead.key_file: "},
		{"bare hex key in key_file", `key: "` + gcmKey + `"`, `key_file: ` + pasted[2:], "22: states[0].aead.key_file: "},
		{"key as aead name", `name: "rfc4106(gcm(aes))"`, `name: "` + pasted + `"`, "22: states[0].aead.name: unknown algorithm"},
		{"key as enc name", `enc: {name: "ecb(cipher_null)"}`, `enc: {name: "` + pasted + `"}`, "33: states[1].enc.name: unknown algorithm"},
		{"key as auth name", `auth: {name: "hmac(sha256)"`, `auth: {name: "` + pasted[2:] + `"`, "34: states[1].auth.name: unknown algorithm"},
		{"key with a stray character", `key: "` + gcmKey + `"`, `key: "` + pasted + `z"`, "22: states[0].aead.key: "},
		{"key not hex", `key: "` + gcmKey + `"`, `key: "` + pasted[:20] + "g" + pasted[21:] + `"`, "22: states[0].aead.key: not hex"},
		{"key without 0x", `key: "` + gcmKey + `"`, `key: "` + pasted[2:] + `"`, "22: states[0].aead.key: want 0x-prefixed hex"},
		{"key with a space", `key: "` + gcmKey + `"`, `key: "` + pasted[:20] + " " + pasted[20:] + `"`, "22: states[0].aead.key: "},
		{"key as a list", `key: "` + gcmKey + `"`, `key: [` + pasted + `]`, "22: states[0].aead.key: want 0x-prefixed hex, got a list"},
		{"key as the aead", `aead: {name: "rfc4106(gcm(aes))", key: "` + gcmKey + `", icv_bits: 128}`, `aead: "` + pasted + `"`, "22: states[0].aead: want a mapping"},
		{"key without key:", `key: "` + gcmKey + `"`, `"` + pasted + `"`, "22: states[0].aead: unknown field"},
		{"key in icv_bits", "icv_bits: 128", "icv_bits: " + pasted, "22: states[0].aead.icv_bits: "},
		{"key in trunc_bits", inlineAuth + `}`, inlineAuth + `, trunc_bits: ` + pasted[2:] + `}`, "34: states[1].auth.trunc_bits: "},
		{"key in spi", "spi: 0x00001001", "spi: " + pasted, "18: states[0].spi: "},
		{"key as an alias", `key: "` + gcmKey + `"`, `key: *` + pasted[2:], " yaml: unknown anchor"},
		{"key in mode", "mode: tunnel", "mode: " + pasted, "20: states[0].mode: want tunnel or transport"},
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "ipsecd.yaml")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(path, []byte(edit(t, tt.old, tt.new)), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			if err == nil {
				t.Fatal("Load accepted it")
			}
			first, _, _ := strings.Cut(err.Error(), "\n")
			if !strings.HasPrefix(first, path+":"+tt.want) {
				t.Errorf("first error %q, want it to start %q", first, path+":"+tt.want)
			}
			if holdsPasted(err.Error()) {
				t.Errorf("error holds the pasted key:\n%s", err)
			}
		})
	}
}

// TestMalformedKeyFileNotEchoed: a key_file whose content is not a key is
// refused without showing the content.
func TestMalformedKeyFileNotEchoed(t *testing.T) {
	dir := t.TempDir()
	for _, content := range []string{pasted + "zz", "key: " + pasted, pasted[:41], "\"" + pasted + "\""} {
		writeMode(t, filepath.Join(dir, "k.hex"), content, 0o600)
		path := filepath.Join(dir, "ipsecd.yaml")
		writeMode(t, path, edit(t, `key: "`+gcmKey+`"`, "key_file: k.hex"), 0o600)
		_, err := Load(path)
		if err == nil || !strings.HasPrefix(err.Error(), path+":22: states[0].aead.key_file: ") {
			t.Errorf("key_file holding %q: error %v, want it refused at states[0].aead.key_file", content, err)
		}
		if err != nil && holdsPasted(err.Error()) {
			t.Errorf("error holds the file's content:\n%s", err)
		}
	}
}

// TestControlPathNotEchoed: ControlPath, which reads only the control key,
// does not show a key pasted there either.
func TestControlPathNotEchoed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ipsecd.yaml")
	for _, tt := range []struct {
		text    string
		wantErr bool
	}{
		{"control: !!int " + pasted + "z\n", false}, // a (strange) path
		{"control: *" + pasted[2:] + "\n", true},
		{"control: [" + pasted + "]\n", true},
		{"control: {" + pasted + ": 1}\n", true},
	} {
		writeMode(t, path, tt.text, 0o600)
		_, err := ControlPath(path)
		if (err != nil) != tt.wantErr {
			t.Errorf("ControlPath(%q): error %v, want one: %t", tt.text, err, tt.wantErr)
		}
		if err != nil && holdsPasted(err.Error()) {
			t.Errorf("ControlPath(%q): error holds the pasted key: %v", tt.text, err)
		}
	}
}

// TestEAPSecrets: secrets of type eap hold users' EAP passwords by EAP
// identity (any text, a Windows domain's backslash included), apart from
// the IKE pre-shared keys: never a connection's PSK.
func TestEAPSecrets(t *testing.T) {
	text := raEdit(t, `secrets:
  - {ids: [vpn.example.net], secret: "a long enough test secret"}`, `secrets:
  - {type: eap, ids: [alice, 'CORP\dave'], secret: "alice-mschapv2-pw"}
  - {type: eap, ids: [vpn.example.net], secret: "not the psk"}
  - {ids: [vpn.example.net], secret: "a long enough test secret"}`)
	c, err := Parse("ra.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"alice", `CORP\dave`} {
		if k, ok := c.EAPSecret(id); !ok || string(k) != "alice-mschapv2-pw" {
			t.Errorf("EAPSecret(%q) = %v", id, ok)
		}
	}
	if _, ok := c.EAPSecret("Alice"); ok {
		t.Error("EAPSecret(Alice) found alice's: EAP identities compare exactly")
	}
	if got := string(c.Connections[0].PSK); got != "a long enough test secret" {
		t.Errorf("the connection's PSK is the eap secret's")
	}
	if s := c.String(); !strings.Contains(s, `secret type eap ids [alice CORP\dave] (secret not shown)`) || strings.Contains(s, "alice-mschapv2-pw") {
		t.Errorf("String():\n%s", s)
	}
	for _, tt := range []struct{ old, new, want string }{
		{`{ids: [vpn.example.net], secret:`, `{type: eap, secret:`, "ra.yaml:29: secrets[0].ids: missing; an eap secret names the EAP identities (eap_id) whose password it is"},
		{`{ids: [vpn.example.net], secret:`, `{type: xauth, ids: [a], secret:`, `ra.yaml:29: secrets[0].type: want ike or eap, got "xauth"`},
	} {
		_, err := Parse("ra.yaml", []byte(raEdit(t, tt.old, tt.new)))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("got %v, want %s", err, tt.want)
		}
	}
}
