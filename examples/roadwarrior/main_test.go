package main

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/internal/dnstest"
	"github.com/ipsecd/ipsecd/internal/looppair"
	"github.com/ipsecd/ipsecd/stack/stackike"
)

// TestExample runs the example against a gateway in the test's process
// (a stackike netstack with the pool 10.3.0.0/24, the DNS server
// 10.4.0.53 naming intranet.corp.example, and a web server on
// 10.4.0.1): the program gets 10.3.0.1, resolves the name through the
// tunnel and fetches the page, which the server answers with the
// client's address as it saw it. Only the underlay addresses of
// roadwarrior.yaml are changed (to a free loopback pair), and the PSK is
// a fresh one, as genkeys.sh makes. No root needed.
func TestExample(t *testing.T) {
	self, gwAddr := looppair.NATT(t)
	dir := t.TempDir()
	key := make([]byte, 32)
	crand.Read(key)
	psk := "0x" + hex.EncodeToString(key)
	if err := os.MkdirAll(filepath.Join(dir, "keys"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "keys", "alice.psk"), []byte(psk+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile("roadwarrior.yaml")
	if err != nil {
		t.Fatal(err)
	}
	shipped := string(text)
	for old, new := range map[string]string{`udp: "0.0.0.0:4500"`: fmt.Sprintf(`udp: "%s:4500"`, self), "remote_addrs: [192.0.2.1]": fmt.Sprintf("remote_addrs: [%s]", gwAddr)} {
		if !strings.Contains(shipped, old) {
			t.Fatalf("roadwarrior.yaml has no %q to change", old)
		}
		shipped = strings.Replace(shipped, old, new, 1)
	}
	path := filepath.Join(dir, "roadwarrior.yaml")
	if err := os.WriteFile(path, []byte(shipped), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("shipped config: %v", err)
	}
	if len(cfg.Warnings) != 0 {
		t.Errorf("roadwarrior.yaml: warnings %q, want none", cfg.Warnings)
	}
	gateway(t, gwAddr, psk)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	start := time.Now()
	if err := run(ctx, cfg, "http://intranet.corp.example/", &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Logf("up, resolved, fetched and down in %v:\n%s", time.Since(start).Round(time.Millisecond), out.String())
	for _, want := range []string{"virtual IP [10.3.0.1], DNS servers [10.4.0.53]", "200 OK", "hello 10.3.0.1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the example's output lacks %q", want)
		}
	}
}

// gateway runs a remote-access gateway on a netstack at addr:4500 until
// the test ends.
func gateway(t *testing.T, addr netip.Addr, psk string) {
	cfg, err := config.Parse("gateway", []byte(fmt.Sprintf(`state_dir: %s
underlay: {udp: "%s:4500"}
interfaces:
  - {name: gw, if_id: 1, addresses: [10.4.0.1/24, 10.4.0.53/32], routes: [10.3.0.0/24]}
pools:
  - {name: rw, addrs: 10.3.0.0/24, dns: [10.4.0.53]}
connections:
  - name: rw
    remote_addrs: ["%%any"]
    pools: [rw]
    proposals: [aes256-sha256-x25519]
    local: {auth: psk, id: vpn.example.net}
    remote: {auth: psk, id: alice@corp.example}
    children:
      - {name: rw-net, if_id: 1, local_ts: [10.4.0.0/24], remote_ts: [dynamic], esp_proposals: [aes128gcm16]}
secrets:
  - {ids: [alice@corp.example, vpn.example.net], secret: "%s"}
`, t.TempDir(), addr, psk)))
	if err != nil {
		t.Fatal(err)
	}
	gw, err := stackike.New(stackike.Config{File: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	dns, err := gw.ListenUDP(&net.UDPAddr{IP: net.ParseIP("10.4.0.53"), Port: 53})
	if err != nil {
		t.Fatal(err)
	}
	go dnstest.Serve(dns, map[string]netip.Addr{"intranet.corp.example.": netip.MustParseAddr("10.4.0.1")})
	ln, err := gw.ListenTCP(&net.TCPAddr{IP: net.ParseIP("10.4.0.1"), Port: 80})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		fmt.Fprintf(w, "hello %s\n", host)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close(); dns.Close() })
}
