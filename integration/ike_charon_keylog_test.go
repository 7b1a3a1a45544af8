//go:build linux

package integration

import (
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestIKECharonKeylog: the keys ipsecd writes to its ike.keylog files are
// the ones charon derived and logged for the same exchanges, and tshark,
// given only ipsecd's files, decrypts the captured IKE_AUTH and the ESP
// of pings both ways.
func TestIKECharonKeylog(t *testing.T) {
	if _, err := exec.LookPath("tshark"); err != nil {
		t.Skip("tshark is not installed (scripts/test.sh installs it)")
	}
	r := newIKERig(t, ikeSpec{})
	pcap := filepath.Join(t.TempDir(), "underlay.pcap")
	stop := captureFile(t, r.p.b, "veth1", pcap, "udp")
	from := r.ch.LogSize()
	r.up(t, "ipsecd")
	ping(t, r.p.a, innerB4, 3)
	stop()

	// ike.keylog is a path prefix: the files end in Wireshark's names.
	wsDir := t.TempDir()
	read := func(name string) string {
		files, _ := filepath.Glob(r.keylog + "*" + name)
		if len(files) != 1 {
			all, _ := filepath.Glob(r.keylog + "*")
			t.Fatalf("want one keylog file ending in %s, have %v", name, all)
		}
		b, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(wsDir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
		return strings.ToLower(string(b))
	}
	ikeLines, espLines := read("ikev2_decryption_table"), read("esp_sa")
	for _, k := range []struct{ file, text, name string }{
		{"ikev2_decryption_table", ikeLines, "Sk_ei secret"},
		{"ikev2_decryption_table", ikeLines, "Sk_er secret"},
		{"ikev2_decryption_table", ikeLines, "Sk_ai secret"},
		{"ikev2_decryption_table", ikeLines, "Sk_ar secret"},
		{"esp_sa", espLines, "encryption initiator key"},
		{"esp_sa", espLines, "encryption responder key"},
	} {
		theirs := r.ch.Key(from, k.name)
		if theirs == nil {
			t.Fatalf("charon's log has no %q", k.name)
		}
		if !strings.Contains(k.text, hex.EncodeToString(theirs)) {
			t.Errorf("ipsecd's %s does not hold charon's %s %x:\n%s", k.file, k.name, theirs, k.text)
		}
	}

	tshark := func(filter string) string {
		cmd := exec.Command("tshark", "-r", pcap, "-n", "-V", "-o", "esp.enable_encryption_decode:TRUE", "-Y", filter)
		cmd.Env = append(os.Environ(), "WIRESHARK_CONFIG_DIR="+wsDir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("tshark: %v\n%s", err, out)
		}
		return string(out)
	}
	if out := tshark("isakmp.exchangetype == 35"); !strings.Contains(out, "a.test") || !strings.Contains(out, "b.test") {
		t.Errorf("tshark did not decrypt IKE_AUTH with ipsecd's keylog (no IDi a.test, IDr b.test):\n%.3000s", out)
	}
	for _, want := range []string{"Echo (ping) request", "Echo (ping) reply"} {
		if out := tshark("icmp"); strings.Count(out, want) < 3 {
			t.Errorf("tshark decrypted %d ESP packets with %q, want 3 or more:\n%.3000s", strings.Count(out, want), want, tshark("esp"))
		}
	}
}
