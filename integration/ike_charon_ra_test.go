//go:build linux

package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/internal/charontest"
)

// raPKI writes a CA and the gateway's certificate (a.test, ECDSA P-256)
// and key into dir, and returns their paths.
func raPKI(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	gwKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ipsecd RA test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	gwTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "a.test"}, DNSNames: []string{"a.test"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour)}
	gwDER, err := x509.CreateCertificate(rand.Reader, gwTmpl, ca, &gwKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := x509.MarshalPKCS8PrivateKey(gwKey)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("gw.pem", "CERTIFICATE", gwDER), write("gw.key", "PRIVATE KEY", key)
}

// raGateway is ipsecd's config as a remote-access gateway: certificate,
// a pool, EAP-MSCHAPv2 users, and the network behind it (198.51.100.0/24,
// on its interface) routed from the pool's clients.
func raGateway(cert, key string) string {
	return fmt.Sprintf(`log: {level: debug}
underlay: {udp: "0.0.0.0:4500"}
interfaces:
  - {name: ipsec1, if_id: 1, addresses: [198.51.100.1/24], routes: [10.3.0.0/24]}
pools:
  - {name: rw, addrs: 10.3.0.0/24, dns: [10.3.0.53], dns_domains: [corp.example]}
connections:
  - name: rw
    local_addrs: [%s]
    proposals: [aes256-sha256-x25519]
    pools: [rw]
    local:  {auth: pubkey, id: a.test, cert: %s, key: %s}
    remote: {auth: eap-mschapv2}
    children:
      - {name: net, if_id: 1, local_ts: [198.51.100.0/24], remote_ts: [dynamic], esp_proposals: [aes128gcm16]}
secrets:
  - {type: eap, ids: [alice], secret: alice-mschapv2-pw}
`, underlayA4, cert, key)
}

// TestIKECharonRoadWarrior: the real binary as a remote-access gateway
// and charon 5.9.8 (kernel-libipsec) as the road warrior: EAP-MSCHAPv2
// against the gateway's certificate, a virtual IP from the pool with its
// DNS server, ping and a checksummed TCP stream from the virtual IP to the
// network behind the gateway; ike list and pool list show the client;
// a reconnect, and a reconnect after a restart of the gateway, get the
// same address back (the lease kept in state_dir).
func TestIKECharonRoadWarrior(t *testing.T) {
	charontest.Require(t)
	p := newPair(t)
	dir := t.TempDir()
	caFile, cert, key := raPKI(t, dir)
	// kernel-libipsec routes remote_ts into its TUN and needs a route
	// towards the gateway to do it.
	p.b.mustRun(t, "ip", "route", "add", "default", "via", underlayA4)
	ch := charontest.Start(t, p.b.name, "")
	conn := charontest.Conn{LocalAddrs: underlayB4, RemoteAddrs: underlayA4, Proposals: "aes256-sha256-x25519", Encap: true,
		Local: charontest.Peer{Auth: "eap-mschapv2", ID: "b.test", EAPID: "alice"}, Remote: charontest.Peer{Auth: "pubkey", ID: "a.test", CACerts: caFile},
		VIPs: "0.0.0.0", RemoteTS: "198.51.100.0/24", ESP: "aes128gcm16", EAPSecret: "alice-mschapv2-pw"}
	swanctlDir := filepath.Join(dir, "swanctl")
	if err := os.MkdirAll(filepath.Join(swanctlDir, "x509ca"), 0o700); err != nil {
		t.Fatal(err)
	}
	ch.LoadDir(conn.String(), swanctlDir)
	d := startDaemon(t, p.a, raGateway(cert, key))

	up := func(what string) control.IKESAInfo {
		t.Helper()
		if out, err := ch.Swanctl("--initiate", "--child", "net", "--timeout", "15"); err != nil {
			t.Fatalf("%s: swanctl --initiate: %v\n%s", what, err, out)
		}
		s := d.waitIKE("alice's child", anyChild)
		if s.RemoteEAPID != "alice" || fmt.Sprint(s.RemoteVIPs) != "[10.3.0.1]" || fmt.Sprint(s.Children[0].RemoteTS) != "[10.3.0.1/32]" {
			t.Fatalf("%s: ike list: EAP identity %q, virtual IPs %v, remote_ts %v; want alice, 10.3.0.1 and 10.3.0.1/32", what, s.RemoteEAPID, s.RemoteVIPs, s.Children[0].RemoteTS)
		}
		if out, _ := p.b.run("ip", "addr", "show", "dev", "ipsec0"); !strings.Contains(out, "10.3.0.1/32") {
			t.Fatalf("%s: charon's ipsec0 has no 10.3.0.1:\n%s", what, out)
		}
		return s
	}
	down := func() {
		t.Helper()
		if out, err := ch.Swanctl("--terminate", "--ike", "test", "--timeout", "10"); err != nil {
			t.Fatalf("swanctl --terminate: %v\n%s", err, out)
		}
		deadline := time.Now().Add(10 * time.Second)
		for len(d.ikeList()) > 0 {
			if time.Now().After(deadline) {
				t.Fatal("ipsecd still lists the IKE SA 10 s after charon deleted it")
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	up("first connect")
	ping(t, p.b, "198.51.100.1", 3)
	tcpTransfer(t, p.b, p.a, "198.51.100.1", 1<<20)
	if log := ch.LogSince(0); !strings.Contains(log, "INTERNAL_IP4_DNS") || !strings.Contains(log, "authentication of 'a.test' with ECDSA_WITH_SHA256_DER successful") {
		t.Errorf("charon's log lacks the DNS attribute or our certificate's authentication")
	}
	out, err := d.ctl("pool", "list", "--leases")
	if err != nil || !strings.Contains(out, "rw ") || !strings.Contains(out, "10.3.0.1") || !strings.Contains(out, "online  'alice'") {
		t.Errorf("pool list --leases: %v\n%s", err, out)
	}
	if out, _ := d.ctl("ike", "list"); !strings.Contains(out, "remote EAP identity 'alice', virtual IPs 10.3.0.1") {
		t.Errorf("ike list does not show alice's EAP identity and address:\n%s", out)
	}

	down()
	if out, _ := d.ctl("pool", "list", "--leases"); !strings.Contains(out, "offline 'alice'") {
		t.Errorf("after the disconnect, alice's lease is not offline:\n%s", out)
	}
	up("reconnect")
	ping(t, p.b, "198.51.100.1", 2)
	down()

	// A restarted gateway gives alice her address back: the lease is in
	// state_dir.
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	d.start()
	up("reconnect after the gateway's restart")
	ping(t, p.b, "198.51.100.1", 2)
}
