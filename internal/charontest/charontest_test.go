//go:build linux

package charontest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A piece of charon's file log at ike = 4: a key's hex dump, prefixed
// with time and thread, then the next key.
const keyLog = `14:08:57 16[IKE] Sk_ei secret => 32 bytes @ 0x7f0
14:08:57 16[IKE]    0: 8A B3 9F 51 A9 DC 82 E6 00 11 22 33 44 55 66 77  ...Q..........fw
14:08:57 16[IKE]   16: 61 01 A6 93 00 00 FF EE DD CC BB AA 99 88 77 66  a.............wf
14:08:57 16[IKE] Sk_er secret => 4 bytes @ 0x7f1
14:08:57 16[IKE]    0: 01 02 03 04                                      ....
14:08:57 16[CHD] encryption initiator key => 2 bytes @ 0x7f2
14:08:57 16[CHD]    0: AB CD                                            ..
14:09:00 16[CHD] encryption initiator key => 2 bytes @ 0x7f3
14:09:00 16[CHD]    0: EF 01                                            ..
`

func TestKeys(t *testing.T) {
	c := &Charon{Log: filepath.Join(t.TempDir(), "charon.log")}
	if err := os.WriteFile(c.Log, []byte(keyLog), 0o600); err != nil {
		t.Fatal(err)
	}
	want := []byte{0x8a, 0xb3, 0x9f, 0x51, 0xa9, 0xdc, 0x82, 0xe6, 0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
		0x61, 0x01, 0xa6, 0x93, 0, 0, 0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x88, 0x77, 0x66}
	if got := c.Key(0, "Sk_ei secret"); !bytes.Equal(got, want) {
		t.Errorf("Sk_ei secret: got %x, want %x", got, want)
	}
	if got := c.Key(0, "Sk_er secret"); !bytes.Equal(got, []byte{1, 2, 3, 4}) {
		t.Errorf("Sk_er secret: got %x, want 01020304", got)
	}
	if got := c.Keys(0, "encryption initiator key"); len(got) != 2 || !bytes.Equal(got[0], []byte{0xab, 0xcd}) || !bytes.Equal(got[1], []byte{0xef, 0x01}) {
		t.Errorf("encryption initiator key: got %x, want [abcd ef01]", got)
	}
	// From an offset past the first child's keys, only the second's.
	from := strings.Index(keyLog, "14:09:00")
	if got := c.Key(from, "encryption initiator key"); !bytes.Equal(got, []byte{0xef, 0x01}) {
		t.Errorf("encryption initiator key after %d: got %x, want ef01", from, got)
	}
	if got := c.Key(0, "Sk_ai secret"); got != nil {
		t.Errorf("Sk_ai secret, not logged: got %x, want nil", got)
	}
}

func TestConn(t *testing.T) {
	psk := Conn{LocalAddrs: "192.0.2.1", RemoteAddrs: "192.0.2.2", Proposals: "aes256-sha256-x25519", Encap: true,
		Local: Peer{ID: "a.test"}, Remote: Peer{ID: "b.test"}, LocalTS: "198.51.100.0/24", RemoteTS: "203.0.113.0/24",
		ESP: "aes128gcm16", DPDDelay: "1s", Unique: "never"}.String()
	for _, want := range []string{"  test {\n", "    encap = yes\n", "    dpd_delay = 1s\n", "    unique = never\n", "      auth = psk\n      id = a.test\n",
		"      net {\n", "        start_action = none\n", "    id-a = a.test\n    id-b = b.test\n    secret = \"" + PSK + "\"\n"} {
		if !strings.Contains(psk, want) {
			t.Errorf("swanctl.conf lacks %q:\n%s", want, psk)
		}
	}
	if strings.Contains(psk, "dpd_action") || strings.Contains(psk, "certs") || strings.Contains(Conn{}.String(), "unique") {
		t.Errorf("swanctl.conf has keys that were not set:\n%s", psk)
	}
	certs := Conn{Local: Peer{Auth: "pubkey", ID: "a.test", Certs: "/a.pem"}, Remote: Peer{Auth: "pubkey", ID: "b.test", CACerts: "/ca.pem"}}.String()
	if !strings.Contains(certs, "certs = /a.pem") || !strings.Contains(certs, "cacerts = /ca.pem") || strings.Contains(certs, "secrets") {
		t.Errorf("a pubkey connection: want certs and cacerts and no secret:\n%s", certs)
	}
}
