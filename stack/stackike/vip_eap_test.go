package stackike

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/ikenode"
	"github.com/ipsecd/ipsecd/internal/looppair"
	"github.com/ipsecd/ipsecd/internal/testpki"
)

// TestRoadWarriorEAP: the sidecar road warrior logs in to a sidecar
// gateway as alice with EAP-MSCHAPv2 (the gateway by its certificate),
// takes 10.3.0.1 and sends a checksummed stream from it behind the
// gateway.
func TestRoadWarriorEAP(t *testing.T) {
	dir := t.TempDir()
	cert, key := selfSigned(t, dir, "vpn.corp.example")
	la, lb := looppair.NATT(t)
	gw, err := New(Config{File: eapGatewayConfig(t, lb, cert, key, "secret: alice-password")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	rw, err := New(Config{File: parse(t, fmt.Sprintf(`state_dir: %[1]s/rw
underlay: {udp: "%[2]s:4500"}
interfaces:
  - {name: rw, if_id: 1, routes: [10.4.0.0/24]}
connections:
  - name: rw
    remote_addrs: [%[3]s]
    vips: [0.0.0.0]
    proposals: [aes256-sha256-x25519]
    local: {auth: eap-mschapv2, id: alice@corp.example, eap_id: alice}
    remote: {auth: pubkey, id: vpn.corp.example, cacerts: [%[4]s]}
    children:
      - {name: net, if_id: 1, local_ts: [dynamic], remote_ts: [10.4.0.0/24], esp_proposals: [aes128gcm16]}
secrets:
  - {type: eap, ids: [alice], secret: alice-password}
`, dir, la, lb, cert))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rw.Close() })
	start := time.Now()
	if err := rw.Initiate(ikenode.Target{IKE: "rw"}); err != nil {
		t.Fatal(err)
	}
	if vip := waitVIP(t, rw, start); vip.String() != "10.3.0.1" || !holds(rw, vip) {
		t.Fatalf("virtual IP %v (netstack holds it: %v), want 10.3.0.1", vip, holds(rw, vip))
	}
	streamFromVIP(t, rw, gw, 4<<20)
}

// eapGatewayConfig is a remote-access gateway on a netstack at
// self:4500 that proves itself with cert and key (vpn.corp.example) and
// takes alice by EAP-MSCHAPv2 with the password of secret (the eap
// secret's secret: or secret_file: item), handing out 10.3.0.0/24 with
// the DNS server 10.4.0.53, which is its own address beside 10.4.0.1.
func eapGatewayConfig(t testing.TB, self netip.Addr, cert, key, secret string) *config.Config {
	t.Helper()
	return parse(t, fmt.Sprintf(`underlay: {udp: "%s:4500"}
interfaces:
  - {name: gw, if_id: 1, addresses: [10.4.0.1/24, 10.4.0.53/32], routes: [10.3.0.0/24]}
pools:
  - {name: rw, addrs: 10.3.0.0/24, dns: [10.4.0.53]}
connections:
  - name: rw
    pools: [rw]
    proposals: [aes256-sha256-x25519]
    local: {auth: pubkey, id: vpn.corp.example, cert: %s, key: %s}
    remote: {auth: eap-mschapv2, eap_id: "%%any"}
    children:
      - {name: rw-net, if_id: 1, local_ts: [10.4.0.0/24], remote_ts: [dynamic], esp_proposals: [aes128gcm16]}
secrets:
  - {type: eap, ids: [alice], %s}
`, self, cert, key, secret))
}

// selfSigned writes a self-signed certificate for name (a CA, its own
// trust anchor; package testpki) and its key into dir, and returns
// their paths.
func selfSigned(t *testing.T, dir, name string) (cert, key string) {
	t.Helper()
	c := testpki.SelfSigned(t, name, testpki.Opts{})
	return c.WriteCert(t, filepath.Join(dir, name+".pem")), c.WriteKey(t, filepath.Join(dir, name+".key"), testpki.PKCS8)
}
