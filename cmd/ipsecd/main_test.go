package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/control/controltest"
)

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
	binDir    string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// ipsecdBinary builds the real command once per test run.
func ipsecdBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "ipsecd-bin")
		if buildErr != nil {
			return
		}
		binary = filepath.Join(binDir, "ipsecd")
		out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
		if err != nil {
			buildErr = errors.New(string(out))
		}
	})
	if buildErr != nil {
		t.Fatalf("go build: %v", buildErr)
	}
	return binary
}

// execIpsecd runs the built binary and returns its exit status and
// output. A run longer than a minute is killed and fails the test.
func execIpsecd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return execCommand(t, ipsecdBinary(t), args...)
}

// execCommand runs name (the built binary, or a wrapper that execs it)
// as execIpsecd does.
func execCommand(t *testing.T, name string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("%s %q still ran after a minute", name, args)
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatal(err)
	}
	return code, o.String(), e.String()
}

// TestCheckExamples checks every shipped example as a user gets it: the
// configs beside the fresh key files examples/genkeys.sh makes (mode
// 0600). ipsecd check must pass each with no warning at all, but for the
// one warning an example exists to show: cloud-azure.yaml's preset offers
// the legacy group Azure's default policy asks for.
func TestCheckExamples(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("builds the binary")
	}
	files, _ := filepath.Glob("../../examples/*.yaml")
	side, _ := filepath.Glob("../../examples/sidecar/*.yaml")
	files = append(files, side...)
	if len(files) < 5 {
		t.Fatalf("found %d example configs, want at least 5", len(files))
	}
	root := t.TempDir()
	var copies []string
	for _, f := range files {
		rel, _ := filepath.Rel("../../examples", f)
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(root, rel)
		os.MkdirAll(filepath.Dir(dst), 0o755)
		// A checkout's mode: the examples are readable by all, and
		// hold no keys, so check has nothing to warn about.
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			t.Fatal(err)
		}
		copies = append(copies, dst)
	}
	// genkeys.sh also makes remote-access.yaml's gateway certificate
	// (self-signed) and its user's password file.
	gen := exec.Command("bash", "../../examples/genkeys.sh", root)
	gen.Env = append(os.Environ(), "IPSECD="+ipsecdBinary(t))
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("examples/genkeys.sh: %v\n%s", err, out)
	}
	for _, f := range copies {
		code, out, errOut := execIpsecd(t, "check", "--config", f)
		wantErr := ""
		if filepath.Base(f) == "cloud-azure.yaml" {
			wantErr = "warning: " + f + ":38: connections[0].proposals[0]: preset azure offers modp1024, a legacy group"
		}
		warnOK := errOut == ""
		if wantErr != "" {
			warnOK = strings.HasPrefix(errOut, wantErr) && strings.Count(errOut, "\n") == 1
		}
		if code != 0 || !warnOK || !strings.HasPrefix(out, f+": ok: ") {
			t.Errorf("check %s: exit %d, stdout %q, stderr %q; want 0, %q and on stderr only %q", f, code, out, errOut, f+": ok: ...", wantErr)
		}
	}
	host := filepath.Join(root, "host-a.yaml")
	code, out, _ := execIpsecd(t, "check", "--config", host)
	if want := host + ": ok: 1 interfaces, 2 states, 2 policies\n"; code != 0 || out != want {
		t.Errorf("check host-a: got %q, want %q", out, want)
	}
}

func TestCheckBroken(t *testing.T) {
	tests := []struct {
		file string
		want []string // stderr lines, prefix-matched
	}{
		{"bad-key.yaml", []string{"testdata/bad-key.yaml:10: states[0].aead.key: rfc4106(gcm(aes)) wants 20 or 36 bytes, got 17"}},
		{"unknown-alg.yaml", []string{`testdata/unknown-alg.yaml:10: states[0].aead.name: unknown algorithm; want rfc4106(gcm(aes)) or rfc7539esp(chacha20,poly1305)`}},
		{"dup-ifid.yaml", []string{"testdata/dup-ifid.yaml:3: interfaces[1].if_id: 1 is already the if_id of interfaces[0]"}},
		{"dup-spi.yaml", []string{"testdata/dup-spi.yaml:6: states[1].spi: states[0] already has dir out, dst 192.0.2.2 and spi 0x1001"}},
		{"ifid-zero.yaml", []string{"testdata/ifid-zero.yaml:4: policies[0].if_id: 0 is out of range"}},
		{"bad-cidr.yaml", []string{`testdata/bad-cidr.yaml:5: interfaces[0].routes[0]: want a CIDR prefix (10.0.0.0/24), got "10.1.0.0/33"`}},
		{"unknown-key.yaml", []string{"testdata/unknown-key.yaml:4: underlay.mrak: unknown field; did you mean mark?"}},
		{"wrong-type.yaml", []string{`testdata/wrong-type.yaml:3: interfaces[0].if_id: want an integer, got "one"`}},
		{"no-encap.yaml", []string{"testdata/no-encap.yaml:6: states[0].encap: missing, and underlay.raw_esp is off: without encap the SA is raw ESP (IP protocol 50)"}},
		{"key-in-keyfile.yaml", []string{"testdata/key-in-keyfile.yaml:11: states[0].aead.key_file: the value looks like key material (not shown), not a path"}},
		{"key-in-name.yaml", []string{
			"testdata/key-in-name.yaml:11: states[0].enc.name: unknown algorithm: the value looks like key material (not shown)",
			"testdata/key-in-name.yaml:12: states[0].auth.name: unknown algorithm: the value looks like key material (not shown)",
		}},
		{"key-both-ways.yaml", []string{"testdata/key-both-ways.yaml:9: states[1].aead.key: the same key as states[0].aead.key: each SA needs keys of its own, in either direction"}},
		// IKE could negotiate it, and no SA could run it.
		{"ike-sha1.yaml", []string{`testdata/ike-sha1.yaml:7: connections[0].proposals[0]: proposal "aes256-sha1-x25519": "sha1" is for ESP proposals only: IKE's own SA takes sha256, sha384 or sha512 for integrity`}},
		{"many-errors.yaml", []string{
			`testdata/many-errors.yaml:1: log.level: want panic`,
			`testdata/many-errors.yaml:3: interfaces[0].mtu: 100 is out of range; want 576..65535`,
			`testdata/many-errors.yaml:5: policies[0].dir: want in or out, got "sideways"`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			code, out, errOut := execIpsecd(t, "check", "--config", "testdata/"+tt.file)
			if code != 1 || out != "" {
				t.Errorf("exit %d, stdout %q; want 1 and nothing", code, out)
			}
			lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
			if len(lines) != len(tt.want) {
				t.Errorf("got %d error lines, want %d:\n%s", len(lines), len(tt.want), errOut)
			}
			for i, w := range tt.want {
				if i < len(lines) && !strings.HasPrefix(lines[i], w) {
					t.Errorf("line %d:\n got %s\nwant %s...", i, lines[i], w)
				}
			}
			if strings.Contains(errOut, "0102030405060708") || strings.Contains(errOut, "5f5e5d5c5b5a5958") {
				t.Errorf("stderr contains key material: %s", errOut)
			}
		})
	}
}

func TestExitCodes(t *testing.T) {
	tests := []struct {
		args []string
		code int
		out  string // substring of stdout+stderr
	}{
		{nil, 2, "usage: ipsecd"},
		{[]string{"help"}, 0, "usage: ipsecd"},
		{[]string{"-h"}, 0, "commands:"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"check"}, 2, "--config FILE is required"},
		{[]string{"check", "--config"}, 2, "flag needs an argument"},
		{[]string{"check", "--config", "testdata/none.yaml"}, 1, "testdata/none.yaml: open testdata/none.yaml: no such file"},
		{[]string{"check", "-h"}, 0, "usage: ipsecd check --config FILE"},
		{[]string{"state"}, 2, "want ipsecd state list|get|add|delete"},
		{[]string{"state", "-h"}, 0, "usage: ipsecd state list|get|add|delete"},
		{[]string{"state", "fly"}, 2, `unknown state command "fly"`},
		{[]string{"state", "get", "--spi", "0x1001"}, 2, "--spi and --dst are required"},
		{[]string{"state", "add", "--src", "192.0.2.1"}, 2, "--dst is required"},
		{[]string{"policy", "add", "--dir", "out"}, 2, "--if-id: want 1..4294967295"},
		{[]string{"stats", "--control", "/nonexistent/ipsecd.sock"}, 1, "is ipsecd running?"},
		{[]string{"stats", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"genkey"}, 2, "--alg is required"},
		{[]string{"genkey", "--alg", "des"}, 2, `unknown algorithm "des"`},
		{[]string{"genkey", "--alg", "ecb(cipher_null)"}, 2, "takes no key"},
		{[]string{"genkey", "--alg", "rfc4106(gcm(aes))", "--bits", "100"}, 2, "takes --bits 128 or 256, not 100"},
		{[]string{"run", "--config", "x"}, 1, ""},
		{[]string{"run", "--config", "x", "extra"}, 2, `ipsecd run: unexpected argument "extra"`},
		{[]string{"run"}, 2, "ipsecd run: --config FILE is required"},
	}
	for _, tt := range tests {
		var o, e bytes.Buffer
		stderr := &e
		code := run(tt.args, &o, stderr)
		if code != tt.code || !strings.Contains(o.String()+e.String(), tt.out) {
			t.Errorf("ipsecd %q: exit %d, output %q; want %d and %q", tt.args, code, o.String()+e.String(), tt.code, tt.out)
		}
	}
}

func TestGenkey(t *testing.T) {
	for _, tt := range []struct {
		alg  string
		bits string
		n    int
	}{
		{"rfc4106(gcm(aes))", "", 20},
		{"rfc4106(gcm(aes))", "128", 20},
		{"rfc4106(gcm(aes))", "256", 36},
		{"rfc7539esp(chacha20,poly1305)", "", 36},
		{"cbc(aes)", "", 16},
		{"cbc(aes)", "192", 24},
		{"cbc(aes)", "256", 32},
		{"hmac(sha256)", "", 32},
		{"hmac(sha1)", "", 20},
		{"hmac(sha384)", "", 48},
		{"hmac(sha512)", "", 64},
	} {
		args := []string{"genkey", "--alg", tt.alg}
		if tt.bits != "" {
			args = append(args, "--bits", tt.bits)
		}
		var o, e bytes.Buffer
		if code := run(args, &o, &e); code != 0 {
			t.Errorf("%q: exit %d: %s", args, code, e.String())
			continue
		}
		out := strings.TrimSpace(o.String())
		k, err := hex.DecodeString(strings.TrimPrefix(out, "0x"))
		if !strings.HasPrefix(out, "0x") || err != nil || len(k) != tt.n {
			t.Errorf("%q: got %q, want 0x and %d bytes of hex", args, out, tt.n)
		}
		var o2 bytes.Buffer
		run(args, &o2, &e)
		if o2.String() == o.String() {
			t.Errorf("%q: two runs gave the same key", args)
		}
	}
}

func TestControlCommands(t *testing.T) {
	b := &controltest.Backend{
		Counters: []control.Counter{{Name: "XfrmInError", Value: 0}, {Name: "XfrmInNoStates", Value: 3}},
	}
	srv := controltest.Start(t, b)
	sock := srv.Path()
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "ipsecd.yaml")
	if err := os.WriteFile(cfgFile, []byte("control: "+sock+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "k.hex")
	os.WriteFile(keyFile, []byte("0x202122232425262728292a2b2c2d2e2f30313233\n"), 0o600)
	const key = "0x000102030405060708090a0b0c0d0e0f10111213"

	ipsecd := func(want int, args ...string) string {
		t.Helper()
		var o, e bytes.Buffer
		if code := run(args, &o, &e); code != want {
			t.Fatalf("ipsecd %q: exit %d, want %d; stderr: %s", args, code, want, e.String())
		}
		return o.String() + e.String()
	}
	ipsecd(0, "state", "add", "--control", sock, "--src", "192.0.2.1", "--dst", "192.0.2.2", "--spi", "0x1001",
		"--dir", "out", "--mode", "tunnel", "--if-id", "1", "--aead", "rfc4106(gcm(aes))", "--key", key,
		"--icv-bits", "128", "--encap", "espinudp:4500:4500", "--replay-window", "64", "--esn")
	ipsecd(0, "state", "add", "--config", cfgFile, "--src", "192.0.2.2", "--dst", "192.0.2.1", "--spi", "4097",
		"--dir", "in", "--mode", "transport", "--if-id", "1", "--enc", "cbc(aes)", "--enc-key", "0x"+strings.Repeat("11", 16),
		"--auth", "hmac(sha256)", "--auth-key", "0x"+strings.Repeat("22", 32), "--sel-src", "10.0.0.0/24",
		"--hard-bytes", "1000")
	ipsecd(0, "state", "add", "--control", sock, "--src", "192.0.2.1", "--dst", "192.0.2.2", "--spi", "0x1002",
		"--dir", "out", "--mode", "tunnel", "--if-id", "1", "--aead", "rfc4106(gcm(aes))", "--key", "@"+keyFile)
	if out := ipsecd(1, "state", "add", "--control", sock, "--src", "192.0.2.1", "--dst", "192.0.2.2", "--spi", "0x1001",
		"--dir", "out", "--mode", "tunnel", "--if-id", "1", "--aead", "rfc4106(gcm(aes))", "--key", key); !strings.Contains(out, "already exists") {
		t.Errorf("adding a state twice: %q", out)
	}
	if out := ipsecd(2, "state", "add", "--control", sock, "--src", "192.0.2.1", "--dst", "192.0.2.2", "--spi", "0x1003",
		"--dir", "out", "--mode", "tunnel", "--if-id", "1", "--aead", "rfc4106(gcm(aes))", "--key", "0x0011"); !strings.Contains(out, "aead.key: rfc4106(gcm(aes)) wants 20 or 36 bytes, got 2") || strings.Contains(out, "0011") {
		t.Errorf("a short key: %q", out)
	}

	list := ipsecd(0, "state", "list", "--control", sock)
	for _, want := range []string{
		"src 192.0.2.2 dst 192.0.2.1\n\tproto esp spi 0x1001 dir in mode transport if_id 0x1\n\treplay-window 64\n\tauth-trunc hmac(sha256) 128\n\tenc cbc(aes)\n\tsel src 10.0.0.0/24 dst any\n",
		"src 192.0.2.1 dst 192.0.2.2\n\tproto esp spi 0x1001 dir out mode tunnel if_id 0x1\n\treplay-window 64 flag esn\n\taead rfc4106(gcm(aes)) 128\n\tencap type espinudp sport 4500 dport 4500\n",
		"limit: soft (INF)(bytes), hard 1000(bytes)",
		"stats:\n\t  replay-window 0 replay 0 failed 0\n",
	} {
		if !strings.Contains(list, want) {
			t.Errorf("state list lacks %q:\n%s", want, list)
		}
	}
	if strings.Contains(list, "0x0001020304") || strings.Contains(list, "1111") {
		t.Errorf("state list without --keys shows a key:\n%s", list)
	}
	if withKeys := ipsecd(0, "state", "list", "--control", sock, "--keys"); !strings.Contains(withKeys, "aead rfc4106(gcm(aes)) "+key+" 128") {
		t.Errorf("state list --keys lacks the key:\n%s", withKeys)
	}
	if got := ipsecd(0, "state", "get", "--control", sock, "--spi", "0x1002", "--dst", "192.0.2.2", "--dir", "out", "--keys"); !strings.Contains(got, "0x202122232425262728292a2b2c2d2e2f30313233") {
		t.Errorf("state get --keys of the @file key:\n%s", got)
	}
	js := ipsecd(0, "state", "get", "--control", sock, "--spi", "0x1001", "--dst", "192.0.2.2", "--dir", "out", "--json")
	if !strings.Contains(js, `"spi": "0x1001"`) || strings.Contains(js, `"key"`) {
		t.Errorf("state get --json:\n%s", js)
	}
	ipsecd(0, "state", "delete", "--control", sock, "--spi", "0x1002", "--dst", "192.0.2.2", "--dir", "out")
	if out := ipsecd(1, "state", "get", "--control", sock, "--spi", "0x1002", "--dst", "192.0.2.2", "--dir", "out"); !strings.Contains(out, "not found") {
		t.Errorf("state get after delete: %q", out)
	}

	ipsecd(0, "policy", "add", "--control", sock, "--dir", "out", "--if-id", "1", "--src", "10.0.0.0/24", "--dst", "10.1.0.0/24")
	ipsecd(0, "policy", "add", "--control", sock, "--dir", "in", "--if-id", "1", "--action", "block")
	if got, want := ipsecd(0, "policy", "list", "--control", sock),
		"src 10.0.0.0/24 dst 10.1.0.0/24\n\tdir out action allow if_id 0x1\nsrc any dst any\n\tdir in action block if_id 0x1\n"; got != want {
		t.Errorf("policy list:\n got %q\nwant %q", got, want)
	}
	ipsecd(0, "policy", "delete", "--control", sock, "--dir", "in", "--if-id", "1")
	if got := ipsecd(0, "policy", "list", "--control", sock, "--json"); !strings.Contains(got, `"dir": "out"`) || strings.Contains(got, `"dir": "in"`) {
		t.Errorf("policy list --json after delete:\n%s", got)
	}
	if out := ipsecd(2, "policy", "add", "--control", sock, "--dir", "out", "--if-id", "1", "--dst", "10.1.0.1/24"); !strings.Contains(out, "host bits") {
		t.Errorf("policy add with host bits: %q", out)
	}

	if got, want := ipsecd(0, "stats", "--config", cfgFile), "XfrmInError\t0\nXfrmInNoStates\t3\n"; got != want {
		t.Errorf("stats:\n got %q\nwant %q", got, want)
	}
	if got := ipsecd(0, "stats", "--control", sock, "--json"); !strings.Contains(got, `"XfrmInNoStates": 3`) {
		t.Errorf("stats --json:\n%s", got)
	}
	if got := ipsecd(0, "interface", "list", "--control", sock); got != "" {
		t.Errorf("interface list with none: %q", got)
	}
}

// TestStateAddHidesKeys: `state add` with key material in the wrong
// argument (the algorithm, the @FILE name) or a malformed key is refused
// without showing it, and a KEY of @FIFO or @/dev/zero is refused at once
// rather than hanging or filling memory.
func TestStateAddHidesKeys(t *testing.T) {
	const pasted = "0x5f5e5d5c5b5a595857565554535251504f4e4d4c"
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"state", "add", "--control", filepath.Join(dir, "none.sock"), "--src", "192.0.2.1", "--dst", "192.0.2.2",
		"--spi", "0x1001", "--dir", "out", "--mode", "tunnel", "--if-id", "1", "--encap", "espinudp:4500:4500"}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"key as the aead", []string{"--aead", pasted, "--key", "0x" + strings.Repeat("ab", 20)}, "aead.name: unknown algorithm"},
		{"key as the enc", []string{"--enc", pasted, "--auth", "hmac(sha256)", "--auth-key", "0x" + strings.Repeat("ab", 32)}, "enc.name: unknown algorithm"},
		{"key as the auth", []string{"--enc", "ecb(cipher_null)", "--auth", pasted[2:], "--auth-key", "0x" + strings.Repeat("ab", 32)}, "auth.name: unknown algorithm"},
		{"key as @FILE", []string{"--aead", "rfc4106(gcm(aes))", "--key", "@" + pasted}, "--key: @FILE: no such file"},
		{"malformed key", []string{"--aead", "rfc4106(gcm(aes))", "--key", pasted + "z"}, "--key: not hex"},
		{"@FIFO", []string{"--aead", "rfc4106(gcm(aes))", "--key", "@" + fifo}, "--key: @FILE: not a regular file (a FIFO)"},
		{"@/dev/zero", []string{"--aead", "rfc4106(gcm(aes))", "--key", "@/dev/zero"}, "--key: @FILE: not a regular file (a character device)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var o, e bytes.Buffer
			done := make(chan int, 1)
			go func() { done <- run(append(slices.Clone(base), tt.args...), &o, &e) }()
			select {
			case code := <-done:
				if code != 2 {
					t.Errorf("exit %d, want 2; stderr: %s", code, e.String())
				}
			case <-time.After(10 * time.Second):
				t.Fatal("state add still runs after 10 s")
			}
			out := o.String() + e.String()
			if !strings.Contains(out, tt.want) {
				t.Errorf("output %q lacks %q", out, tt.want)
			}
			for _, part := range []string{pasted[2:18], pasted[26:42]} {
				if strings.Contains(out, part) {
					t.Errorf("output shows the pasted key: %q", out)
				}
			}
		})
	}
}

// TestCheckFiles: `ipsecd check` refuses a config file that is a FIFO or
// a device at once, and warns about a config file that others can write.
func TestCheckFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ path, want string }{
		{fifo, fifo + ": not a regular file (a FIFO): a config file must be one\n"},
		{"/dev/zero", "/dev/zero: not a regular file (a character device): a config file must be one\n"},
	} {
		code, out, errOut := execIpsecd(t, "check", "--config", tt.path)
		if code != 1 || out != "" || errOut != tt.want {
			t.Errorf("check %s: exit %d, stdout %q, stderr %q; want 1, nothing, %q", tt.path, code, out, errOut, tt.want)
		}
	}
	writable := filepath.Join(dir, "writable.yaml")
	if err := os.WriteFile(writable, []byte("interfaces: [{name: ipsec1, if_id: 1}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(writable, 0o666); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := execIpsecd(t, "check", "--config", writable)
	want := "warning: " + writable + " is writable by group or others (mode 0666), who can change the keys: run chmod go-w " + writable + "\n"
	if code != 0 || errOut != want || !strings.HasSuffix(out, ": ok: 1 interfaces, 0 states, 0 policies\n") {
		t.Errorf("check of a 0666 file: exit %d, stdout %q, stderr %q; want 0, ok, %q", code, out, errOut, want)
	}
}

// TestCheckKeylogFile: `ipsecd check` refuses an ike.keylog whose
// existing file others may read, as run would at start, naming it.
func TestCheckKeylogFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "ipsecd.yaml")
	if err := os.WriteFile(file, []byte("ike: {keylog: k-}\ninterfaces: [{name: ipsec1, if_id: 1}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := execIpsecd(t, "check", "--config", file); code != 0 {
		t.Fatalf("check with no keylog file yet: exit %d, %q", code, errOut)
	}
	esp := filepath.Join(dir, "k-esp_sa")
	if err := os.WriteFile(esp, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(esp, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := execIpsecd(t, "check", "--config", file)
	if code != 1 || out != "" || !strings.Contains(errOut, esp+" has mode 0644") {
		t.Errorf("check with a 0644 keylog file: exit %d, stdout %q, stderr %q; want 1 and the file named", code, out, errOut)
	}
}
