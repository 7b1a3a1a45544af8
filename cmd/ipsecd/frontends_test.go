package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/control/controltest"
	"github.com/ipsecd/ipsecd/sa"
)

// frontState is one state in the words all three front ends share: the
// values as the user types them. An empty field is left out; encKey and
// authKey, when set, stand for enc cbc(aes) with auth (hmac(sha256) when
// empty) instead of the aead.
type frontState struct {
	spi, window, icv              string
	aeadKey                       string
	encKey, authKey, auth         string
	softBytes, hardBytes, softAdd string
}

func (s frontState) authName() string {
	if s.auth == "" {
		return sa.AlgHMACSHA2
	}
	return s.auth
}

// yaml writes s as a config file with one interface and one state.
func (s frontState) yaml() string {
	var b strings.Builder
	b.WriteString("interfaces:\n  - {name: ipsec1, if_id: 1}\nstates:\n")
	fmt.Fprintf(&b, "  - src: 192.0.2.2\n    dst: 192.0.2.1\n    spi: %s\n    dir: in\n    mode: tunnel\n    if_id: 1\n", s.spi)
	b.WriteString("    encap: {type: espinudp}\n")
	if s.encKey != "" {
		fmt.Fprintf(&b, "    enc: {name: \"cbc(aes)\", key: \"%s\"}\n    auth: {name: \"%s\", key: \"%s\"}\n", s.encKey, s.authName(), s.authKey)
	} else {
		fmt.Fprintf(&b, "    aead: {name: \"rfc4106(gcm(aes))\", key: \"%s\"", s.aeadKey)
		if s.icv != "" {
			fmt.Fprintf(&b, ", icv_bits: %s", s.icv)
		}
		b.WriteString("}\n")
	}
	if s.window != "" {
		fmt.Fprintf(&b, "    replay_window: %s\n", s.window)
	}
	var lt []string
	for _, f := range []struct{ key, val string }{{"soft_bytes", s.softBytes}, {"hard_bytes", s.hardBytes}, {"soft_add_seconds", s.softAdd}} {
		if f.val != "" {
			lt = append(lt, f.key+": "+f.val)
		}
	}
	if lt != nil {
		fmt.Fprintf(&b, "    lifetime: {%s}\n", strings.Join(lt, ", "))
	}
	return b.String()
}

// json writes s as the "state" of a state.add request.
func (s frontState) json() string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"src": "192.0.2.2", "dst": "192.0.2.1", "spi": "%s", "dir": "in", "mode": "tunnel", "if_id": 1,`, s.spi)
	b.WriteString(`"encap": {"type": "espinudp", "sport": 4500, "dport": 4500}, `)
	if s.encKey != "" {
		fmt.Fprintf(&b, `"enc": {"name": "cbc(aes)", "key": "%s"}, "auth": {"name": "%s", "key": "%s"}, `, s.encKey, s.authName(), s.authKey)
	} else {
		fmt.Fprintf(&b, `"aead": {"name": "rfc4106(gcm(aes))", "key": "%s"`, s.aeadKey)
		if s.icv != "" {
			fmt.Fprintf(&b, `, "icv_bits": %s`, s.icv)
		}
		b.WriteString("}, ")
	}
	if s.window != "" {
		fmt.Fprintf(&b, `"replay_window": %s, `, s.window)
	}
	b.WriteString(`"lifetime": {`)
	var lt []string
	for _, f := range []struct{ key, val string }{{"soft_bytes", s.softBytes}, {"hard_bytes", s.hardBytes}, {"soft_add_seconds", s.softAdd}} {
		if f.val != "" {
			lt = append(lt, fmt.Sprintf(`"%s": %s`, f.key, f.val))
		}
	}
	b.WriteString(strings.Join(lt, ", ") + "}}")
	return b.String()
}

// args writes s as the arguments of `ipsecd state add`.
func (s frontState) args(sock string) []string {
	args := []string{"state", "add", "--control", sock, "--src", "192.0.2.2", "--dst", "192.0.2.1", "--spi", s.spi,
		"--dir", "in", "--mode", "tunnel", "--if-id", "1", "--encap", "espinudp:4500:4500"}
	if s.encKey != "" {
		args = append(args, "--enc", "cbc(aes)", "--enc-key", s.encKey, "--auth", s.authName(), "--auth-key", s.authKey)
	} else {
		args = append(args, "--aead", "rfc4106(gcm(aes))", "--key", s.aeadKey)
	}
	for _, f := range []struct{ flag, val string }{{"--icv-bits", s.icv}, {"--replay-window", s.window},
		{"--soft-bytes", s.softBytes}, {"--hard-bytes", s.hardBytes}, {"--soft-add-seconds", s.softAdd}} {
		if f.val != "" {
			args = append(args, f.flag, f.val)
		}
	}
	return args
}

// TestOneValidationForAllFrontEnds: a state with a bad value draws the
// same field error whether it comes from the config file (after
// FILE:LINE: states[0].), from a state.add request on the control socket
// (after "invalid request: ") or from `ipsecd state add`: the three front
// ends map their syntax to an sa.Config and sa.Check judges it.
func TestOneValidationForAllFrontEnds(t *testing.T) {
	const key = "0x000102030405060708090a0b0c0d0e0f10111213"
	good := frontState{spi: "0x1001", aeadKey: key}
	cbc := "0x" + strings.Repeat("11", 32)
	tests := []struct {
		name string
		edit func(s *frontState)
		want string // field: message
	}{
		{"replay window over replay.MaxSize", func(s *frontState) { s.window = "70000" },
			"replay_window: 70000 is too large; want 0..65536"},
		{"reserved spi", func(s *frontState) { s.spi = "0xff" },
			"spi: 0xff is reserved; want 0x100..0xffffffff"},
		{"short key", func(s *frontState) { s.aeadKey = "0x0011" },
			"aead.key: rfc4106(gcm(aes)) wants 20 or 36 bytes, got 2"},
		{"icv bits", func(s *frontState) { s.icv = "32" },
			"aead.icv_bits: rfc4106(gcm(aes)) allows 64, 96 or 128, got 32"},
		{"soft over hard", func(s *frontState) { s.softBytes, s.hardBytes = "10", "5" },
			"lifetime.soft_bytes: is larger than hard_bytes"},
		{"seconds past a time.Duration", func(s *frontState) { s.softAdd = "10000000000" },
			"lifetime.soft_add_seconds: 10000000000 is too large; want 0..9223372036"},
		{"one key for enc and auth", func(s *frontState) { s.encKey, s.authKey = cbc, cbc },
			"auth.key: the same key as enc.key: each algorithm needs a key of its own"},
		{"hmac(sha1) key length", func(s *frontState) { s.encKey, s.authKey, s.auth = cbc, "0x"+strings.Repeat("22", 32), sa.AlgHMACSHA1 },
			"auth.key: hmac(sha1) wants 20 bytes, got 32"},
	}
	srv := controltest.Start(t, &controltest.Backend{})
	client, err := control.Dial(srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	// The good state passes all three (each under an SPI of its own), so
	// that each case below fails for its one bad value.
	if _, err := config.Parse("f.yaml", []byte(good.yaml())); err != nil {
		t.Fatalf("file: %v", err)
	}
	if err := addJSON(client, good.json()); err != nil {
		t.Fatalf("control socket: %v", err)
	}
	cli := good
	cli.spi = "0x1002"
	if code, stderr := runCLI(cli.args(srv.Path())); code != 0 {
		t.Fatalf("state add: exit %d: %s", code, stderr)
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := good
			tt.edit(&s)
			fileRE := regexp.MustCompile(`(?m)^f\.yaml:\d+: states\[0\]\.` + regexp.QuoteMeta(tt.want))
			if _, err := config.Parse("f.yaml", []byte(s.yaml())); err == nil || !fileRE.MatchString(err.Error()) {
				t.Errorf("file: got %v, want f.yaml:LINE: states[0].%s", err, tt.want)
			}
			if err := addJSON(client, s.json()); err == nil || !strings.Contains(err.Error(), "invalid request: "+tt.want) {
				t.Errorf("control socket: got %v, want invalid request: %s", err, tt.want)
			}
			cliRE := regexp.MustCompile(`(?m)(^ipsecd state add: |^  )` + regexp.QuoteMeta(tt.want))
			if code, stderr := runCLI(s.args(srv.Path())); code != 2 || !cliRE.MatchString(stderr) {
				t.Errorf("state add: exit %d, stderr %q; want 2 and %s", code, stderr, tt.want)
			}
		})
	}
}

// TestOneDefaultForAllFrontEnds: a state that leaves out replay_window
// (and icv_bits) gets the same values from the config file, a state.add
// request and `ipsecd state add`: sa's defaults (an inbound window of
// sa.DefaultReplayWindow, not 0, which turns anti-replay off).
func TestOneDefaultForAllFrontEnds(t *testing.T) {
	const key = "0x000102030405060708090a0b0c0d0e0f10111213"
	b := &controltest.Backend{}
	srv := controltest.Start(t, b)
	client, err := control.Dial(srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	cfg, err := config.Parse("f.yaml", []byte(frontState{spi: "0x1001", aeadKey: key}.yaml()))
	if err != nil {
		t.Fatalf("file: %v", err)
	}
	if err := addJSON(client, frontState{spi: "0x1002", aeadKey: key}.json()); err != nil {
		t.Fatalf("control socket: %v", err)
	}
	if code, stderr := runCLI(frontState{spi: "0x1003", aeadKey: key}.args(srv.Path())); code != 0 {
		t.Fatalf("state add: exit %d: %s", code, stderr)
	}
	got := map[string]sa.Config{"file": cfg.States[0].Config}
	for name, spi := range map[string]uint32{"control socket": 0x1002, "state add": 0x1003} {
		st, err := b.GetState(control.StateID{Dir: sa.DirIn, SPI: spi, Dst: netip.MustParseAddr("192.0.2.1")}, false)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got[name] = st.Config
	}
	for name, c := range got {
		if c.ReplayWindow != sa.DefaultReplayWindow || c.AEAD.Bits != 128 {
			t.Errorf("%s: replay_window %d, icv_bits %d; want %d and 128", name, c.ReplayWindow, c.AEAD.Bits, sa.DefaultReplayWindow)
		}
	}
}

// TestIntegrityAllFrontEnds: each HMAC of sa's table, named without
// trunc_bits, gets the same key and its default truncation (96, 128,
// 192, 256) from the config file, a state.add request and `ipsecd state
// add`.
func TestIntegrityAllFrontEnds(t *testing.T) {
	b := &controltest.Backend{}
	srv := controltest.Start(t, b)
	client, err := control.Dial(srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for i, tt := range []struct {
		auth string
		key  int
		bits int
	}{{sa.AlgHMACSHA1, 20, 96}, {sa.AlgHMACSHA2, 32, 128}, {sa.AlgHMACSHA384, 48, 192}, {sa.AlgHMACSHA512, 64, 256}} {
		spi := 0x2000 + 4*uint32(i)
		st := func(spi uint32) frontState {
			return frontState{spi: fmt.Sprintf("%#x", spi), encKey: "0x" + strings.Repeat("11", 16),
				authKey: "0x" + strings.Repeat("22", tt.key), auth: tt.auth}
		}
		cfg, err := config.Parse("f.yaml", []byte(st(spi).yaml()))
		if err != nil {
			t.Fatalf("%s: file: %v", tt.auth, err)
		}
		if err := addJSON(client, st(spi+1).json()); err != nil {
			t.Fatalf("%s: control socket: %v", tt.auth, err)
		}
		if code, stderr := runCLI(st(spi + 2).args(srv.Path())); code != 0 {
			t.Fatalf("%s: state add: exit %d: %s", tt.auth, code, stderr)
		}
		got := map[string]sa.Config{"file": cfg.States[0].Config}
		for name, spi := range map[string]uint32{"control socket": spi + 1, "state add": spi + 2} {
			st, err := b.GetState(control.StateID{Dir: sa.DirIn, SPI: spi, Dst: netip.MustParseAddr("192.0.2.1")}, false)
			if err != nil {
				t.Fatalf("%s: %s: %v", tt.auth, name, err)
			}
			got[name] = st.Config
		}
		for name, c := range got {
			if c.Auth == nil || c.Auth.Name != tt.auth || len(c.Auth.Key) != tt.key || c.Auth.Bits != tt.bits {
				t.Errorf("%s: %s: auth %+v, want %s with a %d-byte key and trunc_bits %d", tt.auth, name, c.Auth, tt.auth, tt.key, tt.bits)
			}
		}
	}
}

// addJSON sends a state.add request whose state is the JSON text state.
func addJSON(c *control.Client, state string) error {
	var spec control.StateSpec
	if err := json.Unmarshal([]byte(state), &spec); err != nil {
		return fmt.Errorf("request %s: %w", state, err)
	}
	_, err := c.Do(control.Request{Cmd: "state.add", State: &spec})
	return err
}

func runCLI(args []string) (code int, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, e.String()
}

// TestKeyFileArgumentWarns: `ipsecd state add --key @FILE` reads FILE
// with the config's key_file reader, and so warns, as `ipsecd check`
// does for a key_file, when group or others can read it; the state is
// still added.
func TestKeyFileArgumentWarns(t *testing.T) {
	srv := controltest.Start(t, &controltest.Backend{})
	keyFile := filepath.Join(t.TempDir(), "k.hex")
	if err := os.WriteFile(keyFile, []byte("0x202122232425262728292a2b2c2d2e2f30313233\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(keyFile, 0o644); err != nil { // whatever the umask
		t.Fatal(err)
	}
	s := frontState{spi: "0x1001", aeadKey: "@" + keyFile}
	code, stderr := runCLI(s.args(srv.Path()))
	want := fmt.Sprintf("warning: key_file %s is readable by group or others (mode 0644): run chmod 600 %s\n", keyFile, keyFile)
	if code != 0 || stderr != want {
		t.Errorf("state add --key @FILE (mode 0644): exit %d, stderr %q; want 0 and %q", code, stderr, want)
	}
	if err := os.Chmod(keyFile, 0o600); err != nil {
		t.Fatal(err)
	}
	s.spi = "0x1002"
	if code, stderr := runCLI(s.args(srv.Path())); code != 0 || stderr != "" {
		t.Errorf("state add --key @FILE (mode 0600): exit %d, stderr %q; want 0 and nothing", code, stderr)
	}
}
