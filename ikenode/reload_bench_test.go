package ikenode

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/config"
)

// manyConnsYAML is a config of n PSK connections, each its own peer
// address, identity and child, none started: what a reload or a vici
// load-conn of many site-to-site peers walks.
func manyConnsYAML(n int) string {
	var b strings.Builder
	b.WriteString("interfaces:\n  - {name: ipsec1, if_id: 1}\nconnections:\n")
	for i := range n {
		fmt.Fprintf(&b, `  - name: p%d
    local_addrs: [127.0.0.1]
    remote_addrs: [10.9.%d.%d]
    proposals: [aes256-sha256-x25519]
    local: {auth: psk, id: a.test}
    remote: {auth: psk, id: b%d.test}
    children:
      - {name: net%d, if_id: 1, local_ts: [10.1.0.0/16], remote_ts: [10.2.%d.%d/32], esp_proposals: [aes128gcm16]}
`, i, i>>8, i&0xff, i, i, i>>8, i&0xff)
	}
	b.WriteString("secrets:\n  - {ids: [a.test], secret: \"0x6d79207475726e656c207365637265742c206e6f7420666f7220757365\"}\n")
	return b.String()
}

// startMany starts a daemon running the 1,000 connections of
// manyConnsYAML, and returns it with their config.
func startMany(b *testing.B) (*endpoint, *config.Config) {
	cfg, err := config.Parse("many.yaml", []byte(manyConnsYAML(1000)))
	if err != nil {
		b.Fatal(err)
	}
	cfg.IKE.Port = 0
	e := startDaemon(b, newTestNet(), Config{IKE: &cfg.IKEConfig, RawESP: true, Listen: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}, 0x1000)
	b.ReportAllocs()
	b.ResetTimer()
	return e, cfg
}

// BenchmarkReload1000 is a reload of 1,000 unchanged connections (what
// every vici load-conn of one of them cost too, before ReloadConns).
func BenchmarkReload1000(b *testing.B) {
	e, cfg := startMany(b)
	for range b.N {
		res, err := e.m.Reload(&cfg.IKEConfig)
		if err != nil {
			b.Fatal(err)
		}
		if res.Unchanged != 1000 {
			b.Fatalf("reload: %+v, want 1000 unchanged", res)
		}
	}
}

// BenchmarkReloadConns1000 is ReloadConns of one unchanged connection
// beside 999 others: what a vici load-conn of it costs IKE.
func BenchmarkReloadConns1000(b *testing.B) {
	e, cfg := startMany(b)
	for range b.N {
		res, err := e.m.ReloadConns(&cfg.IKEConfig, "p500")
		if err != nil {
			b.Fatal(err)
		}
		if res != (ReloadResult{Unchanged: 1}) {
			b.Fatalf("reload: %+v, want 1 unchanged", res)
		}
	}
}
