package config

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/sa"
)

const (
	gcmKey  = "0x000102030405060708090a0b0c0d0e0f10111213" // 20 bytes
	gcmKey2 = "0x202122232425262728292a2b2c2d2e2f30313233"
)

// good is a complete config; the broken cases below edit copies of it.
var good = `log: {level: debug, format: json}
control: /tmp/ipsecd.sock
metrics: 127.0.0.1:9578
underlay:
  udp: 192.0.2.1:4500
  raw_esp: true
  mark: 0x100
interfaces:
  - name: ipsec1
    if_id: 1
    mtu: 1420
    addresses: [10.10.0.1/24, 2001:db8:1::1/64]
    routes: [10.20.0.0/24, 2001:db8:2::/64]
    queues: 4
states:
  - src: 192.0.2.1
    dst: 192.0.2.2
    spi: 0x00001001
    dir: out
    mode: tunnel
    if_id: 1
    aead: {name: "rfc4106(gcm(aes))", key: "` + gcmKey + `", icv_bits: 128}
    encap: {type: espinudp, sport: 4500, dport: 4501}
    esn: true
    lifetime: {soft_bytes: 1, hard_bytes: 2, soft_packets: 3, hard_packets: 4, soft_add_seconds: 5, hard_add_seconds: 6}
    selector: {src: 10.10.0.0/24, dst: 10.20.0.0/24}
  - src: 192.0.2.2
    dst: 192.0.2.1
    spi: 0x2001
    dir: in
    mode: transport
    if_id: 1
    enc: {name: "ecb(cipher_null)"}
    auth: {name: "hmac(sha256)", key: "0x` + strings.Repeat("ab", 32) + `"}
policies:
  - {dir: out, if_id: 1, src: 10.10.0.0/24, dst: 10.20.0.0/24}
  - {dir: in, if_id: 1, action: block}
`

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	var b []byte
	s = strings.TrimPrefix(s, "0x")
	for i := 0; i < len(s); i += 2 {
		var v byte
		for _, c := range s[i : i+2] {
			v <<= 4
			switch {
			case c >= '0' && c <= '9':
				v |= byte(c - '0')
			case c >= 'a' && c <= 'f':
				v |= byte(c - 'a' + 10)
			}
		}
		b = append(b, v)
	}
	return b
}

func TestParseGood(t *testing.T) {
	c, err := Parse("good.yaml", []byte(good))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := &Config{
		File:     "good.yaml",
		Log:      Log{Level: "debug", Format: "json"},
		Control:  "/tmp/ipsecd.sock",
		StateDir: DefaultStateDir,
		Metrics:  "127.0.0.1:9578",
		Underlay: Underlay{UDP: netip.MustParseAddrPort("192.0.2.1:4500"), RawESP: true, Mark: 0x100},
		Interfaces: []Interface{{
			Name: "ipsec1", IfID: 1, MTU: 1420, Queues: 4, TxQueueLen: 1000, Line: 9,
			Addresses: []netip.Prefix{netip.MustParsePrefix("10.10.0.1/24"), netip.MustParsePrefix("2001:db8:1::1/64")},
			Routes:    []netip.Prefix{netip.MustParsePrefix("10.20.0.0/24"), netip.MustParsePrefix("2001:db8:2::/64")},
		}},
		States: []State{{Line: 16, Config: sa.Config{
			Src: netip.MustParseAddr("192.0.2.1"), Dst: netip.MustParseAddr("192.0.2.2"),
			SPI: 0x1001, Dir: sa.DirOut, Mode: sa.ModeTunnel, IfID: 1,
			AEAD:  &sa.Algorithm{Name: "rfc4106(gcm(aes))", Key: mustHex(t, gcmKey), Bits: 128},
			Encap: &sa.Encap{SrcPort: 4500, DstPort: 4501},
			ESN:   true,
			Lifetime: sa.Lifetime{SoftBytes: 1, HardBytes: 2, SoftPackets: 3, HardPackets: 4,
				SoftAdd: 5 * time.Second, HardAdd: 6 * time.Second},
			Selector: sa.Selector{Src: netip.MustParsePrefix("10.10.0.0/24"), Dst: netip.MustParsePrefix("10.20.0.0/24")},
		}}, {Line: 27, Config: sa.Config{
			Src: netip.MustParseAddr("192.0.2.2"), Dst: netip.MustParseAddr("192.0.2.1"),
			SPI: 0x2001, Dir: sa.DirIn, Mode: sa.ModeTransport, IfID: 1,
			Enc:          &sa.Algorithm{Name: "ecb(cipher_null)"},
			Auth:         &sa.Algorithm{Name: "hmac(sha256)", Key: mustHex(t, strings.Repeat("ab", 32)), Bits: 128},
			ReplayWindow: DefaultReplayWindow,
		}}},
		Policies: []sa.Policy{
			{Dir: sa.DirOut, IfID: 1, Action: sa.ActionAllow,
				Selector: sa.Selector{Src: netip.MustParsePrefix("10.10.0.0/24"), Dst: netip.MustParsePrefix("10.20.0.0/24")}},
			{Dir: sa.DirIn, IfID: 1, Action: sa.ActionBlock},
		},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got\n%#v\nwant\n%#v", c, want)
		for i := range c.States {
			if !reflect.DeepEqual(c.States[i], want.States[i]) {
				t.Errorf("states[%d]: got %+v, want %+v", i, c.States[i].Config, want.States[i].Config)
			}
		}
	}
	if got, want := c.Summary(), "1 interfaces, 2 states, 2 policies"; got != want {
		t.Errorf("Summary() = %q, want %q", got, want)
	}
}

func TestParseDefaults(t *testing.T) {
	for _, text := range []string{"", "# nothing\n", "---\n", "interfaces:\n"} {
		c, err := Parse("empty.yaml", []byte(text))
		if err != nil {
			t.Fatalf("Parse(%q): %v", text, err)
		}
		want := &Config{File: "empty.yaml", Log: Log{Level: "info", Format: "text"},
			Control: DefaultControl, StateDir: DefaultStateDir, Underlay: Underlay{UDP: DefaultUDP}}
		if !reflect.DeepEqual(c, want) {
			t.Errorf("Parse(%q) = %#v, want %#v", text, c, want)
		}
	}
	c, err := Parse("x.yaml", []byte("interfaces: [{name: a, if_id: 5}]\nunderlay: {udp: \":4501\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Interfaces[0]; got.MTU != DefaultMTU || got.Queues != 1 {
		t.Errorf("interface defaults: got mtu %d queues %d, want %d 1", got.MTU, got.Queues, DefaultMTU)
	}
	if got, want := c.Underlay.UDP.String(), "0.0.0.0:4501"; got != want {
		t.Errorf("underlay.udp = %s, want %s", got, want)
	}
}

func TestStateDir(t *testing.T) {
	for _, tt := range []struct{ text, want string }{
		{"state_dir: /srv/ipsecd/\n", "/srv/ipsecd"},
		{"state_dir: state\n", "/etc/ipsecd/state"},
	} {
		c, err := Parse("/etc/ipsecd/x.yaml", []byte(tt.text))
		if err != nil {
			t.Fatal(err)
		}
		if c.StateDir != tt.want {
			t.Errorf("%q: StateDir %q, want %q", tt.text, c.StateDir, tt.want)
		}
	}
}

// edit returns good with the first occurrence of old replaced by new.
func edit(t *testing.T, old, new string) string {
	t.Helper()
	if !strings.Contains(good, old) {
		t.Fatalf("good has no %q", old)
	}
	return strings.Replace(good, old, new, 1)
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		old  string // replaced in good by new; empty old means new is the whole file
		new  string
		want []string // each must be one error line, prefix-matched
	}{
		{"short gcm key", `key: "` + gcmKey + `"`, `key: "0x0001020304050607080910111213141516"`,
			[]string{"f.yaml:22: states[0].aead.key: rfc4106(gcm(aes)) wants 20 or 36 bytes, got 17"}},
		{"chacha key", `name: "rfc4106(gcm(aes))"`, `name: "rfc7539esp(chacha20,poly1305)"`,
			[]string{"f.yaml:22: states[0].aead.key: rfc7539esp(chacha20,poly1305) wants 36 bytes, got 20"}},
		{"hmac key", `"0x` + strings.Repeat("ab", 32) + `"`, `"0xabcd"`,
			[]string{"f.yaml:34: states[1].auth.key: hmac(sha256) wants 32 bytes, got 2"}},
		{"cbc key", `enc: {name: "ecb(cipher_null)"}`, `enc: {name: "cbc(aes)", key: "0x0011"}`,
			[]string{"f.yaml:33: states[1].enc.key: cbc(aes) wants 16, 24 or 32 bytes, got 2"}},
		{"null with key", `enc: {name: "ecb(cipher_null)"}`, `enc: {name: "ecb(cipher_null)", key: "0x0011"}`,
			[]string{"f.yaml:33: states[1].enc.key: ecb(cipher_null) takes no key, got 2 bytes"}},
		{"enc without auth", "    auth: {name: \"hmac(sha256)\", key: \"0x" + strings.Repeat("ab", 32) + "\"}\n", "",
			[]string{"f.yaml:27: states[1].auth: missing; ESP without integrity"}},
		{"aead and enc", "    encap: {type", "    enc: {name: \"cbc(aes)\", key: \"0x00112233445566778899aabbccddeeff\"}\n    encap: {type",
			[]string{"f.yaml:22: states[0].aead: set together with enc or auth"}},
		{"no algorithm", `    aead: {name: "rfc4106(gcm(aes))", key: "` + gcmKey + `", icv_bits: 128}` + "\n", "",
			[]string{"f.yaml:16: states[0].aead: missing; give aead, or enc with auth"}},
		{"unknown algorithm", `name: "rfc4106(gcm(aes))"`, `name: "gcm(aes)"`,
			[]string{`f.yaml:22: states[0].aead.name: unknown algorithm; want rfc4106(gcm(aes)) or rfc7539esp(chacha20,poly1305)`}},
		{"misspelt algorithm", `name: "rfc4106(gcm(aes))"`, `name: "rfc4106(gcm(aes)"`,
			[]string{`f.yaml:22: states[0].aead.name: unknown algorithm; did you mean rfc4106(gcm(aes))?`}},
		{"enc as aead", `name: "rfc4106(gcm(aes))"`, `name: "cbc(aes)"`,
			[]string{"f.yaml:22: states[0].aead.name: cbc(aes) is not an aead algorithm"}},
		{"icv bits", "icv_bits: 128", "icv_bits: 32",
			[]string{"f.yaml:22: states[0].aead.icv_bits: rfc4106(gcm(aes)) allows 64, 96 or 128, got 32"}},
		{"trunc bits", `key: "0x` + strings.Repeat("ab", 32) + `"}`, `key: "0x` + strings.Repeat("ab", 32) + `", trunc_bits: 96}`,
			[]string{"f.yaml:34: states[1].auth.trunc_bits: hmac(sha256) allows 128, got 96"}},
		{"key not hex", `key: "` + gcmKey + `"`, `key: "0xzz0102030405060708090a0b0c0d0e0f101112"`,
			[]string{"f.yaml:22: states[0].aead.key: not hex"}},
		{"key without 0x", `key: "` + gcmKey + `"`, `key: "000102030405060708090a0b0c0d0e0f10111213"`,
			[]string{"f.yaml:22: states[0].aead.key: want 0x-prefixed hex"}},
		{"key odd", `key: "` + gcmKey + `"`, `key: "0x000"`,
			[]string{"f.yaml:22: states[0].aead.key: odd number of hex digits (3)"}},
		{"spi reserved", "spi: 0x00001001", "spi: 0xff",
			[]string{"f.yaml:18: states[0].spi: 0xff is reserved; want 0x100..0xffffffff"}},
		{"spi too big", "spi: 0x00001001", "spi: 0x100000000",
			[]string{"f.yaml:18: states[0].spi: 0x100000000 is out of range"}},
		{"spi missing", "    spi: 0x00001001\n", "",
			[]string{"f.yaml:16: states[0].spi: 0x0 is reserved"}},
		{"duplicate spi", "spi: 0x2001\n    dir: in", "spi: 0x1001\n    dir: in", nil},
		{"dir", "dir: out", "dir: fwd", []string{`f.yaml:19: states[0].dir: want in or out, got "fwd"`}},
		{"mode", "mode: tunnel", "mode: beet", []string{`f.yaml:20: states[0].mode: want tunnel or transport, got "beet"`}},
		{"mode missing", "    mode: tunnel\n", "", []string{`f.yaml:16: states[0].mode: missing; want tunnel or transport`}},
		{"if_id 0", "    if_id: 1\n    aead", "    if_id: 0\n    aead",
			[]string{"f.yaml:21: states[0].if_id: 0 is out of range; want 0x1..0xffffffff"}},
		{"if_id unknown", "    if_id: 1\n    aead", "    if_id: 9\n    aead",
			[]string{"f.yaml:21: states[0].if_id: no interface has if_id 9"}},
		{"policy if_id unknown", "{dir: in, if_id: 1,", "{dir: in, if_id: 3,",
			[]string{"f.yaml:37: policies[1].if_id: no interface has if_id 3"}},
		{"interface if_id 0", "    if_id: 1\n    mtu", "    if_id: 0\n    mtu",
			[]string{"f.yaml:10: interfaces[0].if_id: 0 is out of range"}},
		{"duplicate if_id", "interfaces:\n", "interfaces:\n  - {name: ipsec0, if_id: 1}\n",
			[]string{`f.yaml:11: interfaces[1].if_id: 1 is already the if_id of interfaces[0]`}},
		{"duplicate name", "interfaces:\n", "interfaces:\n  - {name: ipsec1, if_id: 2}\n",
			[]string{`f.yaml:10: interfaces[1].name: "ipsec1" is already the name of interfaces[0]`}},
		{"name too long", "name: ipsec1", "name: ipsec1234567890123",
			[]string{`f.yaml:9: interfaces[0].name: "ipsec1234567890123" is longer than 15 bytes`}},
		{"bad address", "10.10.0.1/24,", "10.10.0.1/33,",
			[]string{`f.yaml:12: interfaces[0].addresses[0]: want an address with prefix length (10.0.0.1/24), got "10.10.0.1/33"`}},
		{"address without length", "10.10.0.1/24,", "10.10.0.1,",
			[]string{`f.yaml:12: interfaces[0].addresses[0]: want an address with prefix length`}},
		{"bad route", "[10.20.0.0/24,", "[10.20.0.0/24x,",
			[]string{`f.yaml:13: interfaces[0].routes[0]: want a CIDR prefix (10.0.0.0/24), got "10.20.0.0/24x"`}},
		{"route host bits", "[10.20.0.0/24,", "[10.20.0.1/24,",
			[]string{`f.yaml:13: interfaces[0].routes[0]: 10.20.0.1/24 has host bits set; did you mean 10.20.0.0/24?`}},
		{"bad selector", "selector: {src: 10.10.0.0/24", "selector: {src: 10.10.0.0/99",
			[]string{`f.yaml:26: states[0].selector.src: want a CIDR prefix`}},
		{"selector family", "dst: 10.20.0.0/24}\n  - src", "dst: 2001:db8::/32}\n  - src",
			[]string{`f.yaml:26: states[0].selector.dst: 2001:db8::/32 is IPv6 but src 10.10.0.0/24 is IPv4`}},
		{"policy bad cidr", "dst: 10.20.0.0/24}\n  - {dir", "dst: 10.20.0.0/240}\n  - {dir",
			[]string{`f.yaml:36: policies[0].dst: want a CIDR prefix`}},
		{"policy action", "action: block", "action: deny",
			[]string{`f.yaml:37: policies[1].action: want allow or block, got "deny"`}},
		{"duplicate policy", "  - {dir: in, if_id: 1, action: block}\n",
			"  - {dir: in, if_id: 1, action: block}\n  - {dir: in, if_id: 1, action: block}\n",
			[]string{`f.yaml:38: policies[2]: same as policies[1]`}},
		{"src dst family", "dst: 192.0.2.2", "dst: 2001:db8::2",
			[]string{`f.yaml:17: states[0].dst: 2001:db8::2 is IPv6 but src 192.0.2.1 is IPv4`}},
		{"bad src", "src: 192.0.2.1\n", "src: 192.0.2.300\n",
			[]string{`f.yaml:16: states[0].src: want an IP address, got "192.0.2.300"`}},
		{"encap type", "type: espinudp", "type: espintcp",
			[]string{`f.yaml:23: states[0].encap.type: want espinudp, got "espintcp"`}},
		{"encap port", "dport: 4501", "dport: 70000",
			[]string{`f.yaml:23: states[0].encap.dport: 70000 is out of range; want 1..65535`}},
		{"replay window", "    esn: true\n", "    esn: true\n    replay_window: 65537\n",
			[]string{`f.yaml:25: states[0].replay_window: 65537 is too large; want 0..65536`}},
		{"esn type", "esn: true", "esn: maybe", []string{`f.yaml:24: states[0].esn: want true or false, got "maybe"`}},
		{"lifetime order", "soft_bytes: 1,", "soft_bytes: 10,",
			[]string{`f.yaml:25: states[0].lifetime.soft_bytes: is larger than hard_bytes`}},
		{"lifetime key", "soft_add_seconds", "soft_add_secs",
			[]string{`f.yaml:25: states[0].lifetime.soft_add_secs: unknown field; did you mean soft_add_seconds?`}},
		{"unknown key", "    esn: true\n", "    esn: true\n    replay_windw: 64\n",
			[]string{`f.yaml:25: states[0].replay_windw: unknown field; did you mean replay_window?`}},
		{"state_dir empty", "control:", "state_dir: \"\"\ncontrol:",
			[]string{`f.yaml:2: state_dir: empty; want the directory that keeps the sequence numbers of static keys across restarts`}},
		{"state_dir type", "control:", "state_dir: [a]\ncontrol:", []string{`f.yaml:2: state_dir: want a string, got a list`}},
		{"vici on the control socket", "control:", "vici: /tmp/ipsecd.sock\ncontrol:",
			[]string{`f.yaml:2: vici: /tmp/ipsecd.sock is the control socket's path; vici needs a socket of its own`}},
		{"vici too long", "control:", "vici: /" + strings.Repeat("v", 110) + "\ncontrol:",
			[]string{`f.yaml:2: vici: 111 bytes long; a unix socket path has at most 107`}},
		{"vici type", "control:", "vici: [a]\ncontrol:", []string{`f.yaml:2: vici: want a string, got a list`}},
		{"unknown top key", "control:", "contrl:",
			[]string{`f.yaml:2: contrl: unknown field; did you mean control?`}},
		{"duplicate key", "    esn: true\n", "    esn: true\n    esn: false\n",
			[]string{`f.yaml:25: states[0].esn: given twice (first at line 24)`}},
		{"wrong type mtu", "mtu: 1420", "mtu: big", []string{`f.yaml:11: interfaces[0].mtu: want an integer, got "big"`}},
		{"wrong type list", "queues: 4", "queues: [4]", []string{`f.yaml:14: interfaces[0].queues: want an integer, got a list`}},
		{"wrong type states", "states:\n", "states: {}\nx:\n", []string{`f.yaml:15: states: want a list, got a mapping`, `f.yaml:16: x: unknown field`}},
		{"mtu range", "mtu: 1420", "mtu: 100", []string{`f.yaml:11: interfaces[0].mtu: 100 is out of range; want 576..65535`}},
		{"mtu ipv6", "mtu: 1420", "mtu: 1000", []string{`f.yaml:11: interfaces[0].mtu: 1000 is below 1280, the minimum for IPv6`}},
		{"queues", "queues: 4", "queues: 65", []string{`f.yaml:14: interfaces[0].queues: 65 is out of range; want 1..64`}},
		{"txqueuelen 0", "queues: 4", "queues: 4\n    txqueuelen: 0", []string{`f.yaml:15: interfaces[0].txqueuelen: 0 is out of range; want 1..65535`}},
		{"txqueuelen too long", "queues: 4", "queues: 4\n    txqueuelen: 65536", []string{`f.yaml:15: interfaces[0].txqueuelen: 65536 is out of range; want 1..65535`}},
		{"log level", "level: debug", "level: loud", []string{`f.yaml:1: log.level: want panic, fatal, error, warn, info, debug or trace, got "loud"`}},
		{"log format", "format: json", "format: xml", []string{`f.yaml:1: log.format: want text or json, got "xml"`}},
		{"underlay udp", "udp: 192.0.2.1:4500", "udp: 192.0.2.1", []string{`f.yaml:5: underlay.udp: want address:port (0.0.0.0:4500), got "192.0.2.1"`}},
		{"mark", "mark: 0x100", "mark: -1", []string{`f.yaml:7: underlay.mark: want an integer, got "-1"`}},
		{"metrics", "metrics: 127.0.0.1:9578", "metrics: localhost", []string{`f.yaml:3: metrics: want host:port, got "localhost"`}},
		{"alias", "", "interfaces: &a []\npolicies: *a\n", []string{`f.yaml:2: policies: YAML aliases are not supported`}},
		{"syntax", "", "states:\n  - src: [\n", []string{`f.yaml:2: yaml: `}},
		{"two documents", "", "log: {level: info}\n---\nlog: {level: info}\n", []string{`f.yaml:2: more than one YAML document`}},
		{"not a mapping", "", "- a\n- b\n", []string{`f.yaml:1: want a mapping, got a list`}},
		{"many errors", "", "interfaces:\n  - {name: a, if_id: 0}\n  - {name: a, if_id: 2, mtu: x}\nfoo: 1\n", []string{
			`f.yaml:2: interfaces[0].if_id: 0 is out of range`,
			`f.yaml:3: interfaces[1].name: "a" is already the name of interfaces[0]`,
			`f.yaml:3: interfaces[1].mtu: want an integer, got "x"`,
			`f.yaml:4: foo: unknown field`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := tt.new
			if tt.old != "" {
				text = edit(t, tt.old, tt.new)
			}
			if tt.name == "duplicate spi" {
				text = strings.Replace(text, "dst: 192.0.2.1\n", "dst: 192.0.2.2\n", 1)
				text = strings.Replace(text, "dir: in\n", "dir: out\n", 1)
				tt.want = []string{"f.yaml:29: states[1].spi: states[0] already has dir out, dst 192.0.2.2 and spi 0x1001"}
			}
			c, err := Parse("f.yaml", []byte(text))
			if err == nil {
				t.Fatalf("Parse succeeded (%s), want errors %q", c.Summary(), tt.want)
			}
			if c != nil {
				t.Errorf("Parse returned a Config with an error")
			}
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error %T is not an ErrorList", err)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) {
				t.Errorf("got %d errors, want %d:\n%s", len(lines), len(tt.want), err)
			}
			for i, w := range tt.want {
				if i < len(lines) && !strings.HasPrefix(lines[i], w) {
					t.Errorf("error %d:\n got %s\nwant %s...", i, lines[i], w)
				}
			}
			for _, key := range []string{gcmKey[2:], gcmKey2[2:], strings.Repeat("ab", 32), "0001020304"} {
				if strings.Contains(err.Error(), key) {
					t.Errorf("error message contains key material:\n%s", err)
				}
			}
		})
	}
}

func TestKeyFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "keys"), 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, "keys", name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a.hex", "  "+gcmKey+"\n")
	write("b.hex", gcmKey2[2:]+"\n")
	write("short.hex", "0x0011\n")
	write("bad.hex", "zz\n")
	cfg := func(file string) string {
		return edit(t, `key: "`+gcmKey+`"`, "key_file: "+file)
	}

	path := filepath.Join(dir, "ipsecd.yaml")
	for _, tt := range []struct {
		file, wantErr string
		want          string
	}{
		{file: "keys/a.hex", want: gcmKey},
		{file: "keys/b.hex", want: gcmKey2},
		{file: filepath.Join(dir, "keys/a.hex"), want: gcmKey},
		{file: "keys/short.hex", wantErr: path + ":22: states[0].aead.key: rfc4106(gcm(aes)) wants 20 or 36 bytes, got 2"},
		{file: "keys/bad.hex", wantErr: path + ":22: states[0].aead.key_file: the file does not hold hex (want the key as hex text, 0x optional)"},
		{file: "keys/none.hex", wantErr: path + ":22: states[0].aead.key_file: no such file or directory"},
	} {
		if err := os.WriteFile(path, []byte(cfg(tt.file)), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Load(path)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("key_file %s: got error %v, want %s", tt.file, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("key_file %s: %v", tt.file, err)
			continue
		}
		if got := c.States[0].AEAD.Key; !reflect.DeepEqual(got, mustHex(t, tt.want)) {
			t.Errorf("key_file %s: got key of %d bytes, not the file's", tt.file, len(got))
		}
	}
	// key and key_file together
	both := edit(t, `key: "`+gcmKey+`"`, `key: "`+gcmKey+`", key_file: keys/a.hex`)
	if _, err := Parse(path, []byte(both)); err == nil || !strings.Contains(err.Error(), "states[0].aead.key_file: given together with key") {
		t.Errorf("key and key_file: got %v", err)
	}
}

func TestLoadMissing(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "none.yaml"))
	if err == nil || !strings.Contains(err.Error(), "none.yaml: open") {
		t.Errorf("got %v, want an open error naming the file", err)
	}
}

func TestRedacted(t *testing.T) {
	c, err := Parse("good.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	r := c.Redacted()
	if r.States[0].AEAD.Key != nil || r.States[1].Auth.Key != nil {
		t.Errorf("Redacted kept a key")
	}
	if c.States[0].AEAD.Key == nil {
		t.Errorf("Redacted changed the original")
	}
	for _, s := range []string{c.String(), c.GoString(), r.String(), c.States[0].String()} {
		for _, key := range []string{gcmKey[2:], strings.Repeat("ab", 32)} {
			if strings.Contains(s, key) {
				t.Errorf("String contains a key:\n%s", s)
			}
		}
	}
	if !strings.Contains(c.String(), "spi 0x1001") {
		t.Errorf("String() lacks the SPI:\n%s", c)
	}
}

func TestCheckState(t *testing.T) {
	c, err := Parse("good.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	s := c.States[0].Config
	if err := sa.Check(&s); err != nil {
		t.Errorf("sa.Check(good) = %v", err)
	}
	s.AEAD = &sa.Algorithm{Name: "rfc4106(gcm(aes))", Key: make([]byte, 17), Bits: 128}
	s.SPI = 1
	err = sa.Check(&s)
	want := "spi: 0x1 is reserved; want 0x100..0xffffffff\naead.key: rfc4106(gcm(aes)) wants 20 or 36 bytes, got 17"
	if err == nil || err.Error() != want {
		t.Errorf("sa.Check = %v, want %s", err, want)
	}
	p := sa.Policy{Dir: sa.DirOut, IfID: 1, Action: sa.ActionAllow}
	if err := sa.CheckPolicy(&p); err != nil {
		t.Errorf("sa.CheckPolicy(good) = %v", err)
	}
	p.IfID = 0
	if err := sa.CheckPolicy(&p); err == nil || !strings.HasPrefix(err.Error(), "if_id: missing") {
		t.Errorf("sa.CheckPolicy(if_id 0) = %v", err)
	}
}

// TestExamples loads every shipped example. The examples hold no keys:
// their key files are made by examples/genkeys.sh, so each is loaded from
// a copy with key files of the right length beside it.
func TestExamples(t *testing.T) {
	files, _ := filepath.Glob("../examples/*.yaml")
	if len(files) < 3 {
		t.Fatalf("found %d examples, want at least 3", len(files))
	}
	keyFile := regexp.MustCompile(`name: "([^"]+)", key_file: ([^,}\s]+)`)
	secretFile := regexp.MustCompile(`secret_file: ([^,}\s]+)`)
	dir := t.TempDir()
	// The certificate and key an example names as keys/gw.pem and
	// keys/gw.key (a gateway's; examples/remote-access.yaml), issued for
	// vpn.example.net by a test CA.
	os.MkdirAll(filepath.Join(dir, "keys"), 0o700)
	pkiFor(t, filepath.Join(dir, "keys"), "vpn.example.net")
	n := 0 // key files written
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		copied := filepath.Join(dir, filepath.Base(f))
		if err := os.WriteFile(copied, data, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, m := range keyFile.FindAllStringSubmatch(string(data), -1) {
			alg, ok := sa.LookupAlgorithm(m[1])
			if !ok || len(alg.KeyBytes) == 0 {
				t.Fatalf("%s: key_file %s for algorithm %q, which takes no key", f, m[2], m[1])
			}
			// A key of its own per file (the same key in two SAs
			// would be refused).
			path := filepath.Join(dir, m[2])
			os.MkdirAll(filepath.Dir(path), 0o700)
			n++
			key := strings.Repeat(fmt.Sprintf("%02x", n), alg.KeyBytes[0])
			if err := os.WriteFile(path, []byte("0x"+key+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		for _, m := range secretFile.FindAllStringSubmatch(string(data), -1) {
			path := filepath.Join(dir, m[1]) // as examples/genkeys.sh makes it
			os.MkdirAll(filepath.Dir(path), 0o700)
			if err := os.WriteFile(path, []byte(fmt.Sprintf("0x%064x\n", len(path))), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := Load(copied); err != nil {
			t.Errorf("%v", err)
		}
	}
}

func TestVici(t *testing.T) {
	c, err := Parse("f.yaml", []byte(edit(t, "control:", "vici: /run/ipsecd/charon.vici\ncontrol:")))
	if err != nil {
		t.Fatal(err)
	}
	if c.Vici != "/run/ipsecd/charon.vici" {
		t.Errorf("Vici = %q, want /run/ipsecd/charon.vici", c.Vici)
	}
	if !strings.Contains(c.String(), "vici: /run/ipsecd/charon.vici\n") {
		t.Errorf("String() leaves vici out:\n%s", c)
	}
	if c, _ := Parse("f.yaml", []byte(good)); c.Vici != "" {
		t.Errorf("without vici: Vici = %q, want off", c.Vici)
	}
}

func TestControlPath(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.yaml")
	os.WriteFile(p, []byte("control: /x/y.sock\nstates: broken\n"), 0o600)
	if got, err := ControlPath(p); err != nil || got != "/x/y.sock" {
		t.Errorf("ControlPath = %q, %v; want /x/y.sock", got, err)
	}
	os.WriteFile(p, []byte("log: {level: info}\n"), 0o600)
	if got, err := ControlPath(p); err != nil || got != DefaultControl {
		t.Errorf("ControlPath = %q, %v; want %s", got, err, DefaultControl)
	}
}

// TestKeyFileNotRegular: a key_file that names a device, a directory, a
// FIFO (which would block the open until a writer comes) or a file too
// large for a key is refused at once, without reading it.
func TestKeyFileNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	writeMode(t, big, strings.Repeat(" ", 4097), 0o600)
	for _, tt := range []struct{ path, want string }{
		{"/dev/zero", "not a regular file (a character device)"},
		{"/", "not a regular file (a directory)"},
		{fifo, "not a regular file (a FIFO)"},
		{big, "4097 bytes: a key file may have at most 4096"},
	} {
		text := edit(t, `key: "`+gcmKey+`"`, "key_file: "+tt.path)
		done := make(chan error, 1)
		go func() { _, err := Parse("f.yaml", []byte(text)); done <- err }()
		select {
		case err := <-done:
			if want := "f.yaml:22: states[0].aead.key_file: " + tt.want; err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("key_file %s: got %v, want %s", tt.path, err, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("key_file %s: Parse still runs after 10 s", tt.path)
		}
	}
}

// TestKeyReuseRefused: a secret key may serve one SA only, whatever the
// directions and algorithms: the second use is refused, naming its key
// field and the first use, never the key. One key in an outbound and an
// inbound SA is refused too: both peers would seal sequence 1, 2, ...
// under it, the same nonces. An AEAD key with only its salt changed is
// the same cipher key.
func TestKeyReuseRefused(t *testing.T) {
	const key = "0x000102030405060708090a0b0c0d0e0f10111213"
	const key32 = "0x" + "303132333435363738393a3b3c3d3e3f404142434445464748494a4b4c4d4e4f"
	aead := func(k string) string { return `aead: {name: "rfc4106(gcm(aes))", key: "` + k + `"}` }
	cbc := func(enc, auth string) string {
		return `enc: {name: "cbc(aes)", key: "` + enc + `"}, auth: {name: "hmac(sha256)", key: "` + auth + `"}`
	}
	other32 := "0x" + strings.Repeat("cd", 32)
	state := func(spi, dir, algs string) string {
		return `  - {src: 192.0.2.1, dst: 192.0.2.2, spi: ` + spi + `, dir: ` + dir + `, mode: tunnel, if_id: 1,
     ` + algs + `, encap: {type: espinudp}}
`
	}
	head := "interfaces:\n  - {name: ipsec1, if_id: 1}\nstates:\n"
	tests := []struct {
		name, text, want string
	}{
		{"two out", head + state("0x1001", "out", aead(key)) + state("0x1002", "out", aead(key)),
			"f.yaml:7: states[1].aead.key: the same key as states[0].aead.key"},
		{"two in", head + state("0x1001", "in", aead(key)) + state("0x1002", "in", aead(key)),
			"f.yaml:7: states[1].aead.key: the same key as states[0].aead.key"},
		{"one each way", head + state("0x1001", "out", aead(key)) + state("0x1002", "in", aead(key)),
			"f.yaml:7: states[1].aead.key: the same key as states[0].aead.key"},
		{"same AES key, other salt", head + state("0x1001", "out", aead(key)) + state("0x1002", "in", aead(key[:34]+"ffffffff")),
			"f.yaml:7: states[1].aead.key: the same key as states[0].aead.key"},
		{"an AEAD's AES key as a cbc key", head + state("0x1001", "out", aead(key)) + state("0x1002", "in", cbc(key[:34], key32)),
			"f.yaml:7: states[1].enc.key: the same key as states[0].aead.key"},
		{"hmac key reused", head + state("0x1001", "out", cbc("0x"+strings.Repeat("ab", 16), key32)) +
			state("0x1002", "in", cbc("0x"+strings.Repeat("ef", 16), key32)),
			"f.yaml:7: states[1].auth.key: the same key as states[0].auth.key"},
		{"enc key as auth key in one SA", head + state("0x1001", "out", cbc(key32, key32)),
			"f.yaml:5: states[0].auth.key: the same key as enc.key"},
		{"an enc key as another SA's auth key", head + state("0x1001", "out", cbc(key32, other32)) +
			state("0x1002", "in", cbc("0x"+strings.Repeat("ef", 16), key32)),
			"f.yaml:7: states[1].auth.key: the same key as states[0].enc.key"},
		{"different keys", head + state("0x1001", "out", aead(key)) + state("0x1002", "in", aead("0x"+strings.Repeat("ab", 20))), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(tt.text))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Parse: %v, want no error", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse error %v, want %q", err, tt.want)
			}
			for _, k := range []string{key[2:], key[2:34], key32[2:], key32[2:18], strings.Repeat("ab", 8)} {
				if strings.Contains(err.Error(), k) {
					t.Errorf("error holds the key: %v", err)
				}
			}
		})
	}
}

// TestInboundSPIUnique: two inbound states may not share an SPI, even to
// different destinations (the data path finds them by SPI alone); two
// outbound states may.
func TestInboundSPIUnique(t *testing.T) {
	state := func(dst, dir, key string) string {
		return `  - {src: 192.0.2.1, dst: ` + dst + `, spi: 0x1001, dir: ` + dir + `, mode: tunnel, if_id: 1,
     aead: {name: "rfc4106(gcm(aes))", key: "0x` + key + `"}, encap: {type: espinudp}}
`
	}
	head := "interfaces:\n  - {name: ipsec1, if_id: 1}\nstates:\n"
	k1, k2 := strings.Repeat("a1", 20), strings.Repeat("b2", 20)
	_, err := Parse("f.yaml", []byte(head+state("192.0.2.2", "in", k1)+state("192.0.2.3", "in", k2)))
	want := "f.yaml:6: states[1].spi: states[0] already has dir in and spi 0x1001 (inbound SAs are found by SPI alone"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("two inbound states, one SPI: %v, want %q", err, want)
	}
	if _, err := Parse("f.yaml", []byte(head+state("192.0.2.2", "out", k1)+state("192.0.2.3", "out", k2))); err != nil {
		t.Errorf("two outbound states, one SPI, two destinations: %v, want no error", err)
	}
}

// TestLoadNotRegular: a config file that is a FIFO (whose open would wait
// for a writer), a device (/dev/zero would be read until memory runs
// out), a directory, or larger than MaxConfigFile is refused at once,
// naming the file.
func TestLoadNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, MaxConfigFile+1); err != nil { // sparse: costs no disk
		t.Fatal(err)
	}
	for _, tt := range []struct{ path, want string }{
		{fifo, fifo + ": not a regular file (a FIFO): a config file must be one"},
		{"/dev/zero", "/dev/zero: not a regular file (a character device)"},
		{dir, dir + ": not a regular file (a directory)"},
		{big, big + ": 16777217 bytes: a config file may have at most 16777216"},
	} {
		done := make(chan error, 1)
		go func() { _, err := Load(tt.path); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("Load(%s): %v, want %s...", tt.path, err, tt.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Load(%s) still runs after 10 s", tt.path)
		}
		if _, err := ControlPath(tt.path); err == nil {
			t.Errorf("ControlPath(%s): no error", tt.path)
		}
	}
}

// TestRawESPNeedsRawSocket: a state without encap is raw ESP, which only
// the underlay's raw sockets carry: with underlay.raw_esp off (the
// default) it is refused at the state's line, in either direction, as its
// traffic would be dropped; with raw_esp on it is accepted.
func TestRawESPNeedsRawSocket(t *testing.T) {
	for _, tt := range []struct {
		name, old, new string
		want           []string
	}{
		{"raw_esp on", "", "", nil},
		{"raw_esp off, inbound", "raw_esp: true", "raw_esp: false",
			[]string{"f.yaml:27: states[1].encap: missing, and underlay.raw_esp is off: without encap the SA is raw ESP"}},
		{"raw_esp left out, both", "  raw_esp: true\n", "",
			[]string{"f.yaml:26: states[1].encap: missing, and underlay.raw_esp is off"}},
		{"raw_esp off, outbound too", "    encap: {type: espinudp, sport: 4500, dport: 4501}\n", "",
			[]string{"f.yaml:15: states[0].encap: missing", "f.yaml:25: states[1].encap: missing"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			text := good
			if tt.old != "" {
				text = edit(t, tt.old, tt.new)
			}
			if tt.name == "raw_esp off, outbound too" {
				text = strings.Replace(text, "  raw_esp: true\n", "", 1)
			}
			_, err := Parse("f.yaml", []byte(text))
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse accepted it, want %q", tt.want)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) {
				t.Errorf("got %d errors, want %d:\n%s", len(lines), len(tt.want), err)
			}
			for i, w := range tt.want {
				if i < len(lines) && !strings.HasPrefix(lines[i], w) {
					t.Errorf("error %d:\n got %s\nwant %s...", i, lines[i], w)
				}
			}
		})
	}
}
