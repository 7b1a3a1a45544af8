//go:build linux

package ike

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCharonInterop negotiates with strongSwan's charon across two network
// namespaces, with our state machine as initiator and as responder: the
// IKE SA and its child come up, are rekeyed from both sides (the child
// with PFS where the ESP proposal names a group), answer a liveness check
// and are deleted by charon. After each step the keys we derived must
// equal those charon logged, and charon must list exactly our SAs.
func TestCharonInterop(t *testing.T) {
	ch, d := charonPair(t)

	for _, tc := range []struct{ ike, esp string }{
		{"aes256-sha256-x25519", "aes128gcm16"},
		{"aes256gcm16-prfsha384-ecp384", "chacha20poly1305-ecp384"},
		{"aes128-sha256-modp2048", "aes256-sha256-modp2048"},
		{"chacha20poly1305-prfsha512-ecp256", "aes256gcm16"},
	} {
		loadTest(ch, tc.ike, tc.esp)
		cfg := peerConfig(t, tc.ike, tc.esp)
		for _, role := range []string{"initiator", "responder"} {
			t.Run(tc.ike+"/"+tc.esp+"/"+role, func(t *testing.T) {
				from := d.establishChecked(t, ch, cfg, role)

				// charon rekeys the child, then we do (and charon answers
				// our delete of the old one).
				d.rekeyChild(t, ch, false)
				wantPFS := strings.Contains(tc.esp, "-modp") || strings.Contains(tc.esp, "-ecp")
				if pfs := d.sa.Children()[0].Suite.DH.Name; (pfs != "") != wantPFS {
					t.Errorf("PFS group %q after a rekey of %q", pfs, tc.esp)
				}
				d.rekeyChild(t, ch, true)
				d.listed(t, ch)

				// charon rekeys the IKE SA, then we do.
				d.rekeyIKEBothWays(t, ch)

				// charon deletes the child; we create it again; we delete
				// it; charon creates it again (CREATE_CHILD_SA on the IKE
				// SA, with PFS where the proposal names a group).
				noChild := func() bool { return len(d.sa.Children()) == 0 && d.sa.NextTimeout().IsZero() }
				oneChild := func() bool { return len(d.sa.Children()) == 1 && d.sa.NextTimeout().IsZero() }
				d.while(t, ch, noChild, "--terminate", "--child", "net", "--timeout", "10")
				from = ch.LogSize()
				d.ask(t, oneChild, func(now time.Time) ([]byte, error) { return d.sa.CreateChild("", now) })
				checkChildKeys(t, ch, from, d.sa.Children()[0])
				d.listed(t, ch)
				d.ask(t, noChild, func(now time.Time) ([]byte, error) { return d.sa.DeleteChild(d.sa.Children()[0], now) })
				if list, _ := ch.Swanctl("--list-sas"); strings.Contains(list, "INSTALLED") {
					t.Fatalf("charon still lists the child we deleted:\n%s", list)
				}
				from = ch.LogSize()
				d.while(t, ch, oneChild, "--initiate", "--child", "net", "--timeout", "10")
				checkChildKeys(t, ch, from, d.sa.Children()[0])
				d.listed(t, ch)

				// A liveness check over the newest IKE SA.
				d.ask(t, func() bool { return d.sa.NextTimeout().IsZero() }, d.sa.Ping)

				// charon deletes the IKE SA; we answer and drop ours.
				d.while(t, ch, func() bool { return d.sa.State() == StateDeleted }, "--terminate", "--ike", "test", "--timeout", "10")
				if list, _ := ch.Swanctl("--list-sas"); strings.Contains(list, "ESTABLISHED") {
					t.Fatalf("charon still lists an SA after the delete:\n%s", list)
				}
			})
		}
	}
}

// TestCharonInteropFailures: a wrong pre-shared key and disjoint
// proposals fail cleanly on both sides, in both roles, and leave no SA.
func TestCharonInteropFailures(t *testing.T) {
	ch, d := charonPair(t)
	for _, tc := range []struct {
		name, ours string
		psk        string
		want       error
		notify     string // charon's log: "generating ... N(notify)" or "received ... notify error"
		long       string
	}{
		{"wrong psk", "aes256-sha256-x25519", "not-the-psk", ErrAuthFailed, "AUTH_FAILED", "AUTHENTICATION_FAILED"},
		{"disjoint proposals", "aes128gcm16-prfsha256-ecp256", "a-test-psk-not-a-secret", ErrNoProposalChosen, "NO_PROP", "NO_PROPOSAL_CHOSEN"},
	} {
		loadTest(ch, "aes256-sha256-x25519", "aes128gcm16")
		cfg := peerConfig(t, tc.ours, "aes128gcm16")
		cfg.PSK = []byte(tc.psk)
		for _, role := range []string{"initiator", "responder"} {
			t.Run(tc.name+"/"+role, func(t *testing.T) {
				from := ch.LogSize()
				failed := func() bool {
					if d.sa != nil && d.sa.State() == StateFailed {
						return true
					}
					for _, err := range d.errs {
						if errors.Is(err, tc.want) {
							return true
						}
					}
					return false
				}
				d.fail(t, ch, cfg, role, failed)
				if role == "initiator" && !errors.Is(d.sa.Err(), tc.want) {
					t.Fatalf("our SA failed with %v, want %v", d.sa.Err(), tc.want)
				}
				if role == "responder" && (len(d.errs) == 0 || !errors.Is(d.errs[len(d.errs)-1], tc.want)) {
					t.Fatalf("our errors %v, want %v", d.errs, tc.want)
				}
				want := "received " + tc.long + " notify error" // charon initiated, we refused
				if role == "initiator" {
					want = "N(" + tc.notify + ") ]" // charon refused us
				}
				if !strings.Contains(ch.LogSince(from), want) {
					t.Errorf("charon's log does not say %q", want)
				}
				for i := 0; i < 20; i++ {
					list, _ := ch.Swanctl("--list-sas")
					if !strings.Contains(list, "test:") {
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
				list, _ := ch.Swanctl("--list-sas")
				t.Fatalf("charon keeps an SA after the failure:\n%s", list)
			})
		}
	}
}

// TestCharonKeylogTshark checks our keylog lines with an independent
// decryptor: tshark decrypts the captured IKE_AUTH with our
// ikev2_decryption_table line and the ESP that charon sends (pings from
// its side of the tunnel) with our esp_sa lines.
func TestCharonKeylogTshark(t *testing.T) {
	ch, d, nsC, nsG := charonNamespaces(t)
	if _, err := exec.LookPath("tshark"); err != nil {
		t.Skip("tshark is not installed")
	}
	for _, tc := range []struct{ ike, esp string }{
		{"aes256-sha256-x25519", "aes128gcm16"},
		{"aes128gcm16-prfsha256-ecp256", "aes256-sha256"},
	} {
		t.Run(tc.ike+"/"+tc.esp, func(t *testing.T) {
			loadTest(ch, tc.ike, tc.esp)
			cfg := peerConfig(t, tc.ike, tc.esp)
			dir := t.TempDir()
			pcap := filepath.Join(dir, "underlay.pcap")
			dump := exec.Command("ip", "netns", "exec", nsG.Name, "tcpdump", "-i", "vg", "-U", "-n", "-w", pcap, "udp")
			if err := dump.Start(); err != nil {
				t.Fatal(err)
			}
			stopped := false
			stop := func() {
				if !stopped {
					stopped = true
					dump.Process.Signal(syscall.SIGINT)
					dump.Wait()
				}
			}
			defer stop()
			// tcpdump writes the file's header once it captures.
			for i := 0; ; i++ {
				if fi, err := os.Stat(pcap); err == nil && fi.Size() >= 24 {
					break
				}
				if i == 50 {
					t.Fatal("tcpdump did not start in 5 s")
				}
				time.Sleep(100 * time.Millisecond)
			}
			d.establish(t, ch, cfg, "initiator")
			// charon's side of the tunnel sends pings into it; nothing
			// answers them (ipsecd's data path is not here), which is fine.
			exec.Command("ip", "netns", "exec", nsC.Name, "ping", "-c", "3", "-i", "0.2", "-W", "1", "-I", "198.51.100.1", "203.0.113.1").Run()
			// The lines are taken before the delete, which wipes the IKE keys.
			child := d.sa.Children()[0]
			ikeLine, ok := d.sa.KeylogIKE()
			espLines, ok2 := child.KeylogESP()
			d.while(t, ch, func() bool { return d.sa.State() == StateDeleted }, "--terminate", "--ike", "test", "--timeout", "10")
			stop()

			if !ok || !ok2 {
				t.Fatal("no keylog lines for a suite Wireshark decrypts")
			}
			if err := os.WriteFile(filepath.Join(dir, "ikev2_decryption_table"), []byte(ikeLine+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "esp_sa"), []byte(strings.Join(espLines, "\n")+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			tshark := func(filter string) string {
				cmd := exec.Command("tshark", "-r", pcap, "-n", "-V", "-o", "esp.enable_encryption_decode:TRUE", "-Y", filter)
				cmd.Env = append(os.Environ(), "WIRESHARK_CONFIG_DIR="+dir)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("tshark: %v\n%s", err, out)
				}
				return string(out)
			}
			if out := tshark("isakmp.exchangetype == 35"); !strings.Contains(out, "b.test") || !strings.Contains(out, "a.test") {
				t.Errorf("tshark did not decrypt IKE_AUTH with our keylog (no IDi b.test, IDr a.test):\n%.3000s", out)
			}
			if out := tshark("icmp.type == 8"); strings.Count(out, "Echo (ping) request") < 3 {
				t.Errorf("tshark did not decrypt charon's ESP with our keylog:\n%.3000s", tshark("esp"))
			}
		})
	}
}

// TestCharonDPD: charon's liveness checks are answered and keep the IKE
// SA up; when we stop answering, charon gives the SA up.
func TestCharonDPD(t *testing.T) {
	ch, d := charonPair(t)
	conn := testConn("aes256-sha256-x25519", "aes128gcm16")
	conn.DPDDelay = "1s"
	ch.Load(conn.String())
	d.establish(t, ch, peerConfig(t, "aes256-sha256-x25519", "aes128gcm16"), "initiator")
	from := ch.LogSize()
	heard := d.sa.LastHeard()
	stop := time.Now().Add(3500 * time.Millisecond)
	d.serve(func() bool { return time.Now().After(stop) })
	if n := strings.Count(ch.LogSince(from), "parsed INFORMATIONAL response"); n < 2 {
		t.Fatalf("charon got %d answers to its liveness checks in 3.5 s, want 2 or more", n)
	}
	if !d.sa.LastHeard().After(heard) {
		t.Fatal("LastHeard did not move with charon's liveness checks")
	}
	d.listed(t, ch)
	// Silence: charon retries (1 s, twice, as configured) and gives up.
	for i := 0; i < 100; i++ {
		if list, _ := ch.Swanctl("--list-sas"); !strings.Contains(list, "ESTABLISHED") {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("charon kept the IKE SA of a peer that stopped answering")
}
