//go:build linux

package ike

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/ike/eap"
	"github.com/ipsecd/ipsecd/internal/charontest"
)

// eapClientOf loads charon as the gateway a.test (an ECDSA certificate,
// a pool of 10.3.0.0/24 with DNS 10.3.0.53) whose one user is alice of
// password "alice-pw", authenticating with auth; it returns our road
// warrior's config, of EAP identity alice and password pw, asking for a
// virtual IP.
func eapClientOf(t *testing.T, ch *charon, auth AuthClass, pw string) *Config {
	t.Helper()
	ca := makeCert(t, testKey(t, "p256", "ca"), certOpts{CN: "ipsecd test CA", CA: true}, nil)
	gw := makeCert(t, testKey(t, "p256", "a"), certOpts{CN: "a.test", DNS: []string{"a.test"}}, ca)
	dir := t.TempDir()
	key, err := x509.MarshalPKCS8PrivateKey(gw.Key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "private"), 0o700); err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, "private", "a.key"), "PRIVATE KEY", key)
	certs := writePEM(t, filepath.Join(dir, "a.pem"), "CERTIFICATE", gw.Cert.Raw)
	conn := charontest.Conn{LocalAddrs: "192.0.2.1", RemoteAddrs: "192.0.2.2", Proposals: "aes256-sha256-x25519",
		Local: charontest.Peer{Auth: "pubkey", ID: "a.test", Certs: certs}, Remote: charontest.Peer{Auth: string(auth), ID: "b.test", EAPID: "alice"},
		LocalTS: "198.51.100.0/24", RemoteTS: "dynamic", ESP: "aes128gcm16", EAPSecret: "alice-pw",
		Pools: "rw", PoolsConf: "pools {\n  rw {\n    addrs = 10.3.0.0/24\n    dns = 10.3.0.53\n  }\n}\n"}
	ch.LoadDir(conn.String(), dir)
	cfg := peerConfig(t, "aes256-sha256-x25519", "aes128gcm16")
	cfg.PSK = nil
	cfg.LocalAuth, cfg.RemoteAuth, cfg.LocalEAPID = auth, AuthPubkey, "alice"
	cfg.CACerts = []*x509.Certificate{ca.Cert}
	cfg.EAPSecret = func(id string) ([]byte, bool) { return []byte(pw), id == "alice" }
	cfg.VIPs = []netip.Addr{netip.IPv4Unspecified()}
	cfg.Child.LocalTS = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}
	cfg.Child.RemoteTS = []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestCharonEAPClient: we are the road warrior of a charon 5.9.8 gateway
// with EAP-MSCHAPv2 and EAP-MD5 (RA-INTEROP's gateway): charon proves
// itself with its certificate, we answer its EAP requests as alice,
// both AUTHs keyed by the MSK (by SK_p for MD5) verify, and we get a
// virtual IP with charon's child keys. A wrong password fails with an
// EAP AuthError naming alice, never the password.
func TestCharonEAPClient(t *testing.T) {
	ch, d := charonPair(t)
	for _, tc := range []struct {
		auth AuthClass
		log  string
	}{{AuthEAPMSCHAPv2, "EAP method EAP_MSCHAPV2 succeeded, MSK established"}, {AuthEAPMD5, "EAP method EAP_MD5 succeeded, no MSK established"}} {
		t.Run(string(tc.auth), func(t *testing.T) {
			cfg := eapClientOf(t, ch, tc.auth, "alice-pw")
			from := ch.LogSize()
			d.establish(t, ch, cfg, "initiator")
			if got := fmt.Sprint(d.sa.LocalVirtualIPs()); got != "[10.3.0.1]" {
				t.Errorf("virtual IPs %s, want [10.3.0.1]", got)
			}
			if d.sa.PeerID().String() != "a.test" || d.sa.PeerAuth() != AuthPubkey {
				t.Errorf("gateway %s by %s, want a.test by its certificate", d.sa.PeerID(), d.sa.PeerAuth())
			}
			checkChildKeys(t, ch, from, d.sa.Children()[0])
			log := ch.LogSince(from)
			for _, want := range []string{tc.log, "authentication of 'b.test' with EAP successful", "remote-eap-id", "established"} {
				if want == "remote-eap-id" {
					if list, _ := ch.Swanctl("--list-sas", "--raw"); !strings.Contains(list, "remote-eap-id=alice") {
						t.Errorf("charon does not list EAP identity alice:\n%s", list)
					}
					continue
				}
				if !strings.Contains(log, want) {
					t.Errorf("charon's log does not say %q", want)
				}
			}
			d.ask(t, func() bool { return d.sa.State() == StateDeleted }, d.sa.Delete)
		})
	}
	t.Run("wrong password", func(t *testing.T) {
		cfg := eapClientOf(t, ch, AuthEAPMSCHAPv2, "not-alices-pw")
		d.fail(t, ch, cfg, "initiator", func() bool { return d.sa != nil && d.sa.State() == StateFailed })
		var ae *eap.AuthError
		if err := d.sa.Err(); !errors.Is(err, ErrAuthFailed) || !errors.As(err, &ae) || ae.Identity != "alice" || strings.Contains(err.Error(), "not-alices") {
			t.Errorf("error %v, want an EAP AuthError of alice without the password", err)
		}
	})
}
