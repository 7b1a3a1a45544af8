package main

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/internal/dnstest"
	"github.com/ipsecd/ipsecd/internal/looppair"
	"github.com/ipsecd/ipsecd/stack/stackike"
)

// bodySize is what the example fetches through the tunnel in the tests.
const bodySize = 4 << 20

// TestExample runs the example against examples/remote-access.yaml as
// its gateway, on a netstack in the test's process (the certificate and
// alice's password from genkeys.sh, EAP-MSCHAPv2, the pool 10.3.0.0/24,
// the DNS server 10.4.0.53 naming intranet.corp.example, and a web server
// on 10.4.0.1): the program gets 10.3.0.1, resolves the name through the
// tunnel and fetches 4 MiB, whose checksum it prints. Of roadwarrior.yaml
// only the underlay addresses are changed (to a free loopback pair). No
// root needed.
func TestExample(t *testing.T) {
	self, gwAddr := looppair.NATT(t)
	cfg, root := exampleTree(t, map[string]string{
		`udp: "0.0.0.0:4500"`:       fmt.Sprintf(`udp: "%s:4500"`, self),
		"remote_addrs: [192.0.2.1]": fmt.Sprintf("remote_addrs: [%s]", gwAddr),
	})
	sum, from := gateway(t, gwAddr, root)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	start := time.Now()
	if err := run(ctx, cfg, "http://intranet.corp.example/", &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Logf("up, resolved, fetched and down in %v:\n%s", time.Since(start).Round(time.Millisecond), out.String())
	checkOutput(t, out.String(), "[10.4.0.53]", sum, from)

	// A wrong password (the gateway holds the right one): the program
	// says so at once, not when its timeout ends.
	if err := os.WriteFile(filepath.Join(root, "keys", "alice.secret"), []byte("not-alices-password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wrong, err := config.Load(filepath.Join(root, "roadwarrior", "roadwarrior.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	err = run(ctx, wrong, "http://intranet.corp.example/", &out)
	if err == nil || !strings.Contains(err.Error(), "authentication failed") || ctx.Err() != nil {
		t.Fatalf("with a wrong password: %v, want at once an error saying the authentication failed", err)
	}
	t.Logf("with a wrong password, after %v: %v", time.Since(start).Round(time.Millisecond), err)
}

// exampleTree lays out ROOT/keys with genkeys.sh's password and gateway
// certificate (ROOT as examples/, so that the paths roadwarrior.yaml
// names hold) and loads roadwarrior.yaml from ROOT/roadwarrior with the
// replacements.
func exampleTree(t *testing.T, replace map[string]string) (*config.Config, string) {
	t.Helper()
	root := t.TempDir()
	if out, err := exec.Command("bash", "../genkeys.sh", root, "keys/gw.pem", "keys/alice.secret").CombinedOutput(); err != nil {
		t.Fatalf("examples/genkeys.sh: %v\n%s", err, out)
	}
	return shipped(t, "roadwarrior.yaml", filepath.Join(root, "roadwarrior", "roadwarrior.yaml"), replace), root
}

// shipped loads the shipped config file from, written to the path to
// with each key of replace, which it must hold, replaced by its value;
// it must load without a warning.
func shipped(t *testing.T, from, to string, replace map[string]string) *config.Config {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for old, new := range replace {
		if !strings.Contains(text, old) {
			t.Fatalf("%s has no %q to change", from, old)
		}
		text = strings.Replace(text, old, new, 1)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(to)
	if err != nil {
		t.Fatalf("shipped config: %v", err)
	}
	if len(cfg.Warnings) != 0 {
		t.Errorf("%s: warnings %q, want none", from, cfg.Warnings)
	}
	return cfg
}

// password is alice's password as genkeys.sh wrote it under root.
func password(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "keys", "alice.secret"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// gateway runs examples/remote-access.yaml on a netstack at addr:4500,
// with root's certificate and password, until the test ends, serving
// DNS and HTTP as serve does. Its DNS server 10.4.0.53 becomes the
// netstack's own beside 10.4.0.1, which the road warrior's child
// reaches.
func gateway(t *testing.T, addr netip.Addr, root string) (sum string, from <-chan net.Addr) {
	cfg := shipped(t, "../remote-access.yaml", filepath.Join(root, "remote-access.yaml"), map[string]string{
		`udp: "0.0.0.0:4500"`:      fmt.Sprintf(`udp: "%s:4500"`, addr),
		"addresses: [10.4.0.1/24]": "addresses: [10.4.0.1/24, 10.4.0.53/32]",
	})
	gw, err := stackike.New(stackike.Config{File: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	dns, err := gw.ListenUDP(&net.UDPAddr{IP: net.ParseIP("10.4.0.53"), Port: 53})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := gw.ListenTCP(&net.TCPAddr{IP: net.ParseIP("10.4.0.1"), Port: 80})
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, dns, ln)
}

// serve answers DNS queries on dns (intranet.corp.example is 10.4.0.1)
// and HTTP requests on ln with bodySize random bytes, until the test
// ends. It returns the body's SHA-256 (hex) and the address of the
// first HTTP client.
func serve(t *testing.T, dns net.PacketConn, ln net.Listener) (sum string, from <-chan net.Addr) {
	go dnstest.Serve(dns, map[string]netip.Addr{"intranet.corp.example.": netip.MustParseAddr("10.4.0.1")})
	body := make([]byte, bodySize)
	crand.Read(body)
	seen := make(chan net.Addr, 1)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
			select {
			case seen <- net.TCPAddrFromAddrPort(ap):
			default:
			}
		}
		w.Write(body)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close(); dns.Close() })
	return fmt.Sprintf("%x", sha256.Sum256(body)), seen
}

// checkOutput checks what the example printed: the virtual IP 10.3.0.1
// and dns, the body whole with its checksum, and that the web server saw
// the virtual IP as the client.
func checkOutput(t *testing.T, out, dns, sum string, from <-chan net.Addr) {
	t.Helper()
	for _, want := range []string{"virtual IP [10.3.0.1], DNS servers " + dns, fmt.Sprintf("200 OK, %d bytes, sha256 %s", bodySize, sum)} {
		if !strings.Contains(out, want) {
			t.Errorf("the example's output lacks %q", want)
		}
	}
	select {
	case a := <-from:
		if ip := a.(*net.TCPAddr).IP.String(); ip != "10.3.0.1" {
			t.Errorf("the web server saw the request from %s, want the virtual IP 10.3.0.1", ip)
		}
	default:
		t.Error("the web server saw no request")
	}
}
