//go:build linux

package profile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/internal/charontest"
	"github.com/ipsecd/ipsecd/tun/netnstest"
)

// TestSwanctlLoadsIntoCharon: charon 5.9.8 loads each swanctl profile
// with swanctl --load-all (a line it cannot read fails the load), and
// lists the connection as written: the gateway's identity, the
// authentication of each end, the child's traffic selectors, the CA.
func TestSwanctlLoadsIntoCharon(t *testing.T) {
	charontest.Require(t)
	ns := netnstest.New(t, "profile")
	ch := charontest.Start(t, ns.Name, "")
	p := newPKI(t, t.TempDir())
	c := loadGateway(t, p)
	for _, tc := range []struct {
		conn string
		want []string
	}{
		{"rw", []string{"rw: IKEv2", "remote: 192.0.2.1", "local public key authentication:", "id: b.test",
			"remote public key authentication:", "id: gw.example.net", "cacerts: O=ipsecd, CN=Profile Test CA",
			"net: TUNNEL", "remote: 198.51.100.0/24"}},
		{"psk", []string{"psk: IKEv2", "local pre-shared key authentication:", "remote pre-shared key authentication:",
			"id: a.test", "psknet: TUNNEL", "local:  203.0.113.0/24", "remote: 198.51.100.0/24"}},
		{"eap", []string{"eap: IKEv2", "local EAP_MSCHAPV2 authentication:", "eap_id: alice", "id: gw.example.net",
			"eapnet: TUNNEL", "remote: 0.0.0.0/0"}},
	} {
		t.Run(tc.conn, func(t *testing.T) {
			user := map[string]string{"eap": "alice"}[tc.conn]
			if user == "" {
				user = "b.test"
			}
			files, err := Swanctl(&c.IKEConfig, Options{Connection: tc.conn, User: user, CA: p.ca})
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(ch.Dir, tc.conn)
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			for _, f := range files[1:] {
				path := filepath.Join(dir, f.Name)
				if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, f.Data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			ch.LoadDir(string(files[0].Data), dir)
			out, err := ch.Swanctl("--list-conns")
			if err != nil {
				t.Fatalf("swanctl --list-conns: %v\n%s", err, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("swanctl --list-conns has no %q:\n%s", w, out)
				}
			}
		})
	}
}
