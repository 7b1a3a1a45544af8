//go:build linux

package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// secret is key material the test gave the daemon, by name.
type secret struct {
	name string
	key  []byte
}

// forms returns the ways a key could leak into text: hex in lower and
// upper case (with or without 0x: the bare hex is a substring of both),
// base64 (what encoding/json makes of a []byte), and the raw bytes; and
// the same for every 8-byte window, so that half a key printed is found
// too.
func (s secret) forms() map[string][]byte {
	out := map[string][]byte{
		"base64": []byte(base64.StdEncoding.EncodeToString(s.key)),
	}
	for i := 0; i+8 <= len(s.key); i++ {
		w := s.key[i : i+8]
		h := hex.EncodeToString(w)
		out[fmt.Sprintf("hex[%d:%d]", i, i+8)] = []byte(h)
		out[fmt.Sprintf("HEX[%d:%d]", i, i+8)] = []byte(strings.ToUpper(h))
		out[fmt.Sprintf("raw[%d:%d]", i, i+8)] = w
	}
	return out
}

// grepSecrets fails the test for every secret found in any output.
func grepSecrets(t *testing.T, outputs map[string]string, secrets []secret) {
	t.Helper()
	for where, text := range outputs {
		for _, s := range secrets {
			for form, b := range s.forms() {
				if i := bytes.Index([]byte(text), b); i >= 0 {
					lo, hi := max(0, i-80), min(len(text), i+len(b)+40)
					t.Errorf("%s shows key %s (%s) at byte %d: ...%q...", where, s.name, form, i, text[lo:hi])
					break
				}
			}
		}
	}
}

// runIpsecd runs the binary outside any namespace and returns its
// combined output.
func runIpsecd(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, ipsecdBin, args...).CombinedOutput()
	return string(out), err
}

// TestSecretsStayOut runs a pair with debug logging whose states use known
// keys, A's outbound one from a key_file and its inbound one inline,
// drives traffic, adds and deletes an SA with a key over the control
// socket, reloads (once applied, once refused for a wrong key length),
// provokes errors (a `state add` with a wrong-length key, a `state get` of
// nothing), and runs `ipsecd check` on good and bad files. Then it greps
// both daemons' whole logs, every CLI output and error, and a metrics
// scrape for every key, in every form (secret.forms). `state list --keys`
// must show the keys, so that the grep is known to see them when they are
// there. On the way, the key-file permission warnings: `ipsecd check` and
// a reload name a config file holding keys and a key_file that others can
// read.
func TestSecretsStayOut(t *testing.T) {
	spec := tunnelSpec{suite: suiteByName("aes-gcm-128"), extraA: "metrics: 127.0.0.1:9578\n"}
	p := newPair(t)
	cfgA, cfgB := spec.configs()
	keyDir := t.TempDir()
	keyFile := filepath.Join(keyDir, "out-1001.key")
	if err := os.WriteFile(keyFile, []byte(hexKey(spec.keyAB)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	inline := `key: "` + hexKey(spec.keyAB) + `"`
	if strings.Count(cfgA, inline) != 1 {
		t.Fatalf("A's config does not hold its out key once")
	}
	cfgA = strings.Replace(cfgA, inline, `key_file: "`+keyFile+`"`, 1)
	if !strings.Contains(cfgA, hexKey(spec.keyBA)) {
		t.Fatalf("A's config does not hold its in key inline")
	}

	keyCtl := randomKey(20)    // added and deleted over the control socket
	keyShort := randomKey(19)  // a `state add` refused for its length
	keyReload := randomKey(20) // a state a reload adds
	keyRefused := randomKey(19)
	secrets := []secret{{"A→B (key_file)", spec.keyAB}, {"B→A (inline)", spec.keyBA}, {"control add", keyCtl},
		{"refused state add", keyShort}, {"reload", keyReload}, {"refused reload", keyRefused}}
	outputs := map[string]string{}
	ctl := func(d *daemon, wantErr bool, args ...string) string {
		t.Helper()
		out, err := d.ctl(args...)
		if (err != nil) != wantErr {
			t.Errorf("ipsecd %s: err %v, want error %v:\n%s", strings.Join(args, " "), err, wantErr, out)
		}
		outputs[d.ns.name+": ipsecd "+strings.Join(args, " ")] = out
		return out
	}

	da := startDaemon(t, p.a, cfgA)
	db := startDaemon(t, p.b, cfgB)
	ping(t, p.a, innerB4, 3)
	ping(t, p.b, innerA4, 3)
	tcpTransfer(t, p.a, p.b, innerB4, 256<<10)

	// The keys are there to be found: --keys shows them.
	keys := ctl(da, false, "state", "list", "--keys")
	for _, k := range [][]byte{spec.keyAB, spec.keyBA} {
		if !strings.Contains(keys, hexKey(k)) {
			t.Fatalf("state list --keys does not show key %x:\n%s", k, keys)
		}
	}
	delete(outputs, da.ns.name+": ipsecd state list --keys")

	// An SA with a key, added and deleted over the control socket.
	da.addState(t, underlayA4, underlayB4, 0x3001, "out", keyCtl)
	if out := ctl(da, false, "state", "get", "--spi", "0x3001", "--dst", underlayB4, "--dir", "out", "--keys"); !strings.Contains(out, hexKey(keyCtl)) {
		t.Errorf("state get --keys does not show the added key:\n%s", out)
	}
	delete(outputs, da.ns.name+": ipsecd state get --spi 0x3001 --dst "+underlayB4+" --dir out --keys")
	ctl(da, false, "state", "get", "--spi", "0x3001", "--dst", underlayB4, "--dir", "out")
	ctl(da, false, "state", "get", "--spi", "0x3001", "--dst", underlayB4, "--dir", "out", "--json")
	ctl(da, false, "state", "list")
	ctl(da, false, "state", "list", "--json")
	da.deleteState(t, 0x3001, underlayB4, "out")
	ping(t, p.a, innerB4, 2)

	// Errors: a key of the wrong length, an SA that does not exist, a
	// duplicate with a key.
	ctl(da, true, "state", "add", "--src", underlayA4, "--dst", underlayB4, "--spi", "0x3002", "--dir", "out",
		"--mode", "tunnel", "--if-id", "1", "--aead", "rfc4106(gcm(aes))", "--key", hexKey(keyShort))
	ctl(da, true, "state", "add", "--src", underlayA4, "--dst", underlayB4, "--spi", "0x3003", "--dir", "out",
		"--mode", "tunnel", "--if-id", "1", "--enc", "cbc(aes)", "--enc-key", hexKey(keyShort), "--auth", "hmac(sha256)", "--auth-key", hexKey(keyShort))
	ctl(da, true, "state", "add", "--src", underlayB4, "--dst", underlayA4, "--spi", "0x2001", "--dir", "in",
		"--mode", "tunnel", "--if-id", "1", "--aead", "rfc4106(gcm(aes))", "--key", hexKey(spec.keyBA))
	ctl(da, true, "state", "get", "--spi", "0x9999", "--dst", underlayB4, "--dir", "out")

	// A reload that applies (a new inbound SA with an inline key), with the
	// config file and the key_file readable by others: both are named.
	if err := os.Chmod(da.cfgPath, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(keyFile, 0o640); err != nil {
		t.Fatal(err)
	}
	extra := fmt.Sprintf(`  - src: "%s"
    dst: "%s"
    spi: 0x1201
    dir: in
    mode: tunnel
    if_id: 1
    %s
    encap: {type: espinudp, sport: 4500, dport: 4500}
`, underlayB4, underlayA4, spec.suite.yaml(keyReload))
	// The states end where extraA's metrics line begins.
	cfgReload := strings.Replace(cfgA, "metrics: ", extra+"metrics: ", 1)
	da.reload(t, cfgReload)
	log := da.waitLog(t, "reloaded:")
	for _, want := range []string{
		da.cfgPath + " holds keys and is readable by group or others (mode 0644): run chmod 600 " + da.cfgPath,
		"key_file " + keyFile + " is readable by group or others (mode 0640): run chmod 600 " + keyFile,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("A's log after the reload lacks the warning %q", want)
		}
	}
	if out := ctl(da, false, "state", "list", "--keys"); !strings.Contains(out, hexKey(keyReload)) {
		t.Errorf("state list --keys does not show the reloaded state's key:\n%s", out)
	}
	delete(outputs, da.ns.name+": ipsecd state list --keys")

	// A reload refused: a state with a 19-byte key.
	bad := strings.Replace(cfgReload, hexKey(keyReload), hexKey(keyRefused), 1)
	da.reload(t, bad)
	da.waitLog(t, "reload refused")

	// ipsecd check: the refused file (exit 1, the field named), then the
	// good one, still readable by others (exit 0, both files named).
	out, err := runIpsecd("check", "--config", da.cfgPath)
	if err == nil || !strings.Contains(out, da.cfgPath+":") || !strings.Contains(out, ".aead.key: rfc4106(gcm(aes)) wants 20 or 36 bytes, got 19") {
		t.Errorf("ipsecd check of the refused file: err %v, want exit 1 naming the key's field:\n%s", err, out)
	}
	outputs["ipsecd check (refused file)"] = out
	if err := os.WriteFile(da.cfgPath, []byte(da.file(cfgReload)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = runIpsecd("check", "--config", da.cfgPath)
	if err != nil || !strings.Contains(out, "warning: "+da.cfgPath+" holds keys") || !strings.Contains(out, "warning: key_file "+keyFile) {
		t.Errorf("ipsecd check of a 0644 file with keys and a 0640 key_file: err %v, want exit 0 and two warnings:\n%s", err, out)
	}
	outputs["ipsecd check (good file)"] = out

	// Everything else a user sees.
	for _, d := range []*daemon{da, db} {
		ctl(d, false, "state", "list")
		ctl(d, false, "state", "list", "--json")
		ctl(d, false, "state", "get", "--spi", "0x1001", "--dst", underlayB4, "--dir", map[*daemon]string{da: "out", db: "in"}[d])
		ctl(d, false, "state", "get", "--spi", "0x2001", "--dst", underlayA4, "--dir", map[*daemon]string{da: "in", db: "out"}[d], "--json")
		ctl(d, false, "stats")
		ctl(d, false, "stats", "--json")
		ctl(d, false, "policy", "list")
	}
	outputs["metrics"] = scrape(t, p.a, "http://127.0.0.1:9578/metrics")

	// Stop both, so that the logs are complete.
	for _, d := range []*daemon{da, db} {
		if err := d.stop(); err != nil {
			t.Errorf("%s: stop: %v", d.ns.name, err)
		}
		outputs[d.ns.name+" log"] = d.log.String()
	}
	if n := strings.Count(outputs[da.ns.name+" log"], "\n"); n < 10 {
		t.Fatalf("A's log has %d lines; want the whole debug log:\n%s", n, outputs[da.ns.name+" log"])
	}
	grepSecrets(t, outputs, secrets)

	// The grep sees keys where they are: it finds both of A's in the
	// --keys listing taken above.
	found := 0
	for _, sc := range secrets[:2] {
		for _, b := range sc.forms() {
			if strings.Contains(keys, string(b)) {
				found++
				break
			}
		}
	}
	if found != 2 {
		t.Errorf("the grep found %d of A's 2 keys in state list --keys, want 2: it would miss a leak", found)
	}
}
