package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/internal/charontest"
)

// TestExampleCharon: the example, with roadwarrior.yaml as shipped, joins
// strongSwan 5.9.8's charon as the gateway it describes (192.0.2.1,
// vpn.example.net by genkeys.sh's certificate, EAP-MSCHAPv2 with alice's
// password from genkeys.sh, the pool 10.3.0.0/24 with the DNS server
// 10.4.0.53), in a network namespace of its own. The example's socket is
// bound in a second namespace at 192.0.2.2:4500 (its netstack stays in
// the test's); behind charon, 10.4.0.53 answers DNS and 10.4.0.1 serves
// 4 MiB over HTTP. The program gets 10.3.0.1 and the DNS server, resolves
// intranet.corp.example through the tunnel and fetches the body whole;
// the web server sees the virtual IP; charon's log says that alice's
// EAP-MSCHAPv2 succeeded and that she got 10.3.0.1.
func TestExampleCharon(t *testing.T) {
	charontest.Require(t)
	cfg, root := exampleTree(t, nil)
	nsC, nsS := charontest.Namespaces(t, "rw-example", "10.4.0.1/32", "10.4.0.53/32")

	// charon's swanctl directory: genkeys.sh's self-signed certificate
	// and its key, as the remote-access example's gateway has them.
	dir := t.TempDir()
	for _, f := range []struct{ from, to string }{{"keys/gw.pem", "x509/gw.pem"}, {"keys/gw.key", "private/gw.key"}} {
		b, err := os.ReadFile(filepath.Join(root, f.from))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f.to)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.to), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ch := charontest.Start(t, nsC.Name, "")
	ch.LoadDir(charontest.Conn{Name: "rw", LocalAddrs: "192.0.2.1", Proposals: "aes256-sha256-x25519",
		Local: charontest.Peer{Auth: "pubkey", ID: "vpn.example.net", Certs: "gw.pem"}, Remote: charontest.Peer{Auth: "eap-mschapv2", EAPID: "%any"},
		Pools: "rw", PoolsConf: "pools {\n  rw {\n    addrs = 10.3.0.0/24\n    dns = 10.4.0.53\n  }\n}\n",
		Child: "rw-net", LocalTS: "10.4.0.0/24", RemoteTS: "dynamic", ESP: "aes128gcm16"}.String()+
		"secrets {\n  eap-alice {\n    id = alice\n    secret = \""+password(t, root)+"\"\n  }\n}\n", dir)

	var dns net.PacketConn
	var ln net.Listener
	if err := nsC.Do(func() (err error) {
		if dns, err = net.ListenPacket("udp", "10.4.0.53:53"); err != nil {
			return err
		}
		ln, err = net.Listen("tcp", "10.4.0.1:80")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	sum, from := serve(t, dns, ln)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	start := time.Now()
	// run binds the underlay socket in nsS as it starts; the netstack,
	// IKE and the fetch then run on the test's other threads.
	err := nsS.Do(func() error { return run(ctx, cfg, "http://intranet.corp.example/", &out) })
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Logf("up, resolved, fetched and down in %v:\n%s", time.Since(start).Round(time.Millisecond), out.String())
	checkOutput(t, out.String(), "[10.4.0.53]", sum, from)
	log := ch.LogSince(0)
	for _, want := range []string{"EAP method EAP_MSCHAPV2 succeeded, MSK established", "assigning virtual IP 10.3.0.1 to peer 'alice'"} {
		if !strings.Contains(log, want) {
			t.Errorf("charon's log lacks %q", want)
		}
	}
}
