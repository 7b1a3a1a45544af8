package ikenode

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/config"
)

// TestReloadSame: a reload keeps a connection whose settings are alike
// (moved in the file, or only a daemon limit changed) and replaces one of
// which anything that shapes it changed: a child's setting, the PSK, an
// identity, the ike: settings the engine takes.
func TestReloadSame(t *testing.T) {
	base := manyConnsYAML(3)
	for _, tc := range []struct {
		name, old, new string
		changed        int
	}{
		{"moved", "connections:\n", "connections:\n\n\n# moved down\n", 0},
		{"daemon limit", "interfaces:", "ike: {block_threshold: 7, init_limit_half_open: 3}\ninterfaces:", 0},
		{"child proposal", "remote_ts: [10.2.0.1/32], esp_proposals: [aes128gcm16]", "remote_ts: [10.2.0.1/32], esp_proposals: [aes256gcm16]", 1},
		{"child selector", "remote_ts: [10.2.0.2/32]", "remote_ts: [10.2.0.3/32]", 1},
		{"remote id", "id: b0.test", "id: c0.test", 1},
		{"psk", `secret: "0x6d`, `secret: "0x6e`, 3},
		{"retransmit", "interfaces:", "ike: {retransmit: {tries: 2}}\ninterfaces:", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := strings.Replace(base, tc.old, tc.new, 1)
			if next == base {
				t.Fatalf("%q is not in the config", tc.old)
			}
			cfg, err := config.Parse("a.yaml", []byte(base))
			if err != nil {
				t.Fatal(err)
			}
			cfg.IKE.Port = 0
			e := startDaemon(t, newTestNet(), Config{IKE: &cfg.IKEConfig, RawESP: true, Listen: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}, 0x1000)
			cfg2, err := config.Parse("a.yaml", []byte(next))
			if err != nil {
				t.Fatal(err)
			}
			cfg2.IKE.Port = 0
			cfg.WipeKeys() // as the daemon does with the config it replaces
			res, err := e.m.Reload(&cfg2.IKEConfig)
			if err != nil {
				t.Fatal(err)
			}
			if want := (ReloadResult{Changed: tc.changed, Unchanged: 3 - tc.changed}); res != want {
				t.Errorf("reload: %+v, want %+v", res, want)
			}
		})
	}
}
