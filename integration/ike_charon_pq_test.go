//go:build linux

package integration

import (
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestIKECharonPQ: ipsecd and strongSwan 6.1's charon (Debian sid's, in
// the chroot scripts/sid-strongswan.sh builds) negotiate post-quantum IKE
// SAs, each side initiating: x25519 with ML-KEM-768 as additional key
// exchange (IKE_INTERMEDIATE), ECP-384 with ML-KEM-1024, and ML-KEM-768
// alone. Ping and a checksummed 1 MiB TCP stream cross the child both
// ways; ipsecd ike list and charon's --list-sas --raw name the same
// exchanges; the child is rekeyed by each side (PFS with the ESP
// proposal's group, ML-KEM-768 alone included, or with ML-KEM-768 as an
// additional exchange in IKE_FOLLOWUP_KE) and carries a ping again; the
// IKE SA is rekeyed by ipsecd (its additional exchange in
// IKE_FOLLOWUP_KE too) and by charon, and the tunnel carries a ping
// after each.
func TestIKECharonPQ(t *testing.T) {
	for _, tc := range []struct {
		name, ike, esp string
		exchanges      string // as ike list and swanctl --list-sas --raw show them
	}{
		{"x25519-ke1_mlkem768", "aes256-sha384-x25519-ke1_mlkem768", "aes256gcm16-x25519-ke1_mlkem768", "dh-group=CURVE_25519 ake1=ML_KEM_768"},
		{"ecp384-ke1_mlkem1024", "aes256-sha384-ecp384-ke1_mlkem1024", "aes256gcm16-ecp384", "dh-group=ECP_384 ake1=ML_KEM_1024"},
		{"mlkem768", "aes256-sha384-mlkem768", "aes256gcm16-mlkem768", "dh-group=ML_KEM_768"},
	} {
		for _, initiator := range []string{"ipsecd", "charon"} {
			t.Run(tc.name+"/"+initiator, func(t *testing.T) {
				r := newIKERig(t, ikeSpec{ike: tc.ike, esp: tc.esp, sid: true})
				first := r.up(t, initiator)
				ping(t, r.p.a, innerB4, 3)
				ping(t, r.p.b, innerA4, 3)
				tcpTransfer(t, r.p.a, r.p.b, innerB4, 1<<20)
				tcpTransfer(t, r.p.b, r.p.a, innerA4, 1<<20)
				r.checkIKEList(t, initiator == "ipsecd", first)
				if sas := r.d.ikeList(); len(sas) != 1 || strings.Join(sas[0].KeyExchanges, " ") != tc.exchanges {
					t.Errorf("ipsecd ike list: key exchanges %+v, want %s", sas, tc.exchanges)
				}
				if text := r.ikeList(); !strings.Contains(text, tc.exchanges) {
					t.Errorf("ipsecd ike list does not show %q:\n%s", tc.exchanges, text)
				}
				raw := r.swanctl(t, "--list-sas", "--raw")
				for _, w := range strings.Fields(tc.exchanges) {
					if !strings.Contains(raw, w) {
						t.Errorf("charon's --list-sas --raw lacks %s:\n%s", w, raw)
					}
				}

				r.ipsecdIKE(t, "rekey", "--child", "net")
				second := r.waitUp(t, "after ipsecd's child rekey", first)
				r.swanctl(t, "--rekey", "--child", "net")
				r.waitUp(t, "after charon's child rekey", second)
				ping(t, r.p.a, innerB4, 2)

				for _, by := range []string{"ipsecd", "charon"} {
					before := charonIKESPIs.FindStringSubmatch(r.ch.ListSAs())
					if by == "ipsecd" {
						r.ipsecdIKE(t, "rekey", "--ike", "charon")
					} else {
						r.swanctl(t, "--rekey", "--ike", "test")
					}
					deadline := time.Now().Add(10 * time.Second)
					for {
						list := r.ch.ListSAs()
						now := charonIKESPIs.FindStringSubmatch(list)
						sas := r.d.ikeList()
						if now != nil && before != nil && now[1] != before[1] && strings.Count(list, "ESTABLISHED") == 1 &&
							len(sas) == 1 && sas[0].SPIInitiator == now[1] && strings.Join(sas[0].KeyExchanges, " ") == tc.exchanges {
							break
						}
						if time.Now().After(deadline) {
							t.Fatalf("no new IKE SA after %s's IKE rekey:\n%s\nipsecd ike list:\n%s", by, list, r.ikeList())
						}
						time.Sleep(100 * time.Millisecond)
					}
					ping(t, r.p.a, innerB4, 2)
				}

				if initiator == "ipsecd" {
					r.ipsecdIKE(t, "terminate", "--ike", "charon")
				} else {
					r.swanctl(t, "--terminate", "--ike", "test", "--timeout", "10")
				}
				r.waitDown(t, initiator+" deleting", 10*time.Second, true)
			})
		}
	}
}

// TestIKECharonPQKeylog: with x25519 + ML-KEM-768 against charon 6.1,
// ipsecd's ike.keylog holds the keys charon derived last (after the
// update of IKE_INTERMEDIATE), with which tshark decrypts IKE_AUTH and
// the ESP of pings, and, as a comment, the keys that protected
// IKE_INTERMEDIATE, with which tshark decrypts its KE payloads.
func TestIKECharonPQKeylog(t *testing.T) {
	if _, err := exec.LookPath("tshark"); err != nil {
		t.Skip("tshark is not installed (scripts/test.sh installs it)")
	}
	r := newIKERig(t, ikeSpec{ike: "aes256-sha384-x25519-ke1_mlkem768", esp: "aes256gcm16", sid: true})
	pcap := filepath.Join(t.TempDir(), "underlay.pcap")
	stop := captureFile(t, r.p.b, "veth1", pcap, "udp")
	from := r.ch.LogSize()
	r.up(t, "ipsecd")
	ping(t, r.p.a, innerB4, 3)
	stop()

	files, _ := filepath.Glob(r.keylog + "*ikev2_decryption_table")
	if len(files) != 1 {
		t.Fatalf("want one ikev2_decryption_table, have %v", files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var final, earlier []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if c, ok := strings.CutPrefix(l, "# before additional key exchange 1 (IKE_INTERMEDIATE 1): "); ok {
			earlier = append(earlier, c)
		} else if !strings.HasPrefix(l, "#") {
			final = append(final, l)
		}
	}
	ei := r.ch.Keys(from, "Sk_ei secret")
	if len(final) != 1 || len(earlier) != 1 || len(ei) != 2 {
		t.Fatalf("keylog %q: want one line and one IKE_INTERMEDIATE comment; charon derived %d key sets", b, len(ei))
	}
	if !strings.Contains(final[0], hex.EncodeToString(ei[1])) || !strings.Contains(earlier[0], hex.EncodeToString(ei[0])) {
		t.Errorf("keylog:\n%s\ncharon's Sk_ei: first %x, after ML-KEM %x", b, ei[0], ei[1])
	}

	tshark := func(table, filter string) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "ikev2_decryption_table"), []byte(table), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("tshark", "-r", pcap, "-n", "-V", "-Y", filter)
		cmd.Env = append(os.Environ(), "WIRESHARK_CONFIG_DIR="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("tshark: %v\n%s", err, out)
		}
		return string(out)
	}
	// The file as ipsecd wrote it, comment and all.
	if out := tshark(string(b), "isakmp.exchangetype == 35"); !strings.Contains(out, "a.test") || !strings.Contains(out, "b.test") {
		t.Errorf("tshark did not decrypt IKE_AUTH with ipsecd's keylog:\n%.3000s", out)
	}
	// IKE_INTERMEDIATE (43) with the keys before the update: its
	// decrypted payload is the KE of method 36.
	// (The KE's group, 36, shows only in the decrypted payload; the
	// request is reassembled from its two fragments.)
	if out := tshark(earlier[0]+"\n", "isakmp.exchangetype == 43"); strings.Count(out, "DH Group #: Unknown (36)") != 2 || strings.Contains(out, "incorrect") {
		t.Errorf("tshark did not decrypt IKE_INTERMEDIATE's KE with the earlier keys:\n%.4000s", out)
	}
	// ... and not with the final ones, which only the messages after it use.
	if out := tshark(final[0]+"\n", "isakmp.exchangetype == 43"); strings.Contains(out, "DH Group #") || !strings.Contains(out, "incorrect") {
		t.Errorf("tshark decrypted IKE_INTERMEDIATE with the keys after the update:\n%.4000s", out)
	}
}
