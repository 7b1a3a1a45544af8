//go:build linux

package integration

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/internal/charontest"
	"github.com/ipsecd/ipsecd/internal/radiustest"
)

// radiusGateway is ipsecd's config as a remote-access gateway whose users
// are FreeRADIUS's: remote auth eap-radius with two servers, the first
// dead (nothing listens on its port), the second FreeRADIUS; a pool with
// radius: true gives the address RADIUS assigns (10.3.0.200) with the
// pool's DNS, and its own addresses (10.3.0.0/25) to clients RADIUS gave
// none. The child's remote_ts covers both.
func radiusGateway(cert, key, dead, auth, acct, secret string) string {
	_, acctPort, _ := net.SplitHostPort(acct)
	return fmt.Sprintf(`log: {level: debug}
metrics: %s
underlay: {udp: "0.0.0.0:4500"}
interfaces:
  - {name: ipsec1, if_id: 1, addresses: [198.51.100.1/24], routes: [10.3.0.0/24]}
eap_radius:
  servers:
    - {name: dead, address: "%s", secret: "%s"}
    - {name: freeradius, address: "%s", acct_port: %s, secret: "%s"}
  retransmit_timeout: 200ms
  retransmit_tries: 2
  accounting: true
pools:
  - {name: rw, addrs: 10.3.0.0/25, dns: [10.3.0.53], radius: true}
`, ikeMetricsAddr, dead, secret, auth, acctPort, secret) + radiusGatewayConn(underlayA4, cert, key, "198.51.100.0/24", "10.3.0.0/24")
}

// radiusGatewayConn is a gateway's connection rw of EAP through RADIUS
// at local, by the certificate of a.test, its clients' addresses from
// pool rw, one child between localTS and remoteTS on interface 1.
func radiusGatewayConn(local, cert, key, localTS, remoteTS string) string {
	return fmt.Sprintf(`connections:
  - name: rw
    local_addrs: [%s]
    proposals: [aes256-sha256-x25519]
    pools: [rw]
    local:  {auth: pubkey, id: a.test, cert: %s, key: %s}
    remote: {auth: eap-radius}
    children:
      - {name: net, if_id: 1, local_ts: [%s], remote_ts: [%s], esp_proposals: [aes128gcm16]}
`, local, cert, key, localTS, remoteTS)
}

// TestIKECharonRADIUS: the real binary as a gateway relaying EAP to
// FreeRADIUS 3.2.1 (in the gateway's namespace), charon 5.9.8 as the
// road warrior with EAP-MSCHAPv2: the first RADIUS server does not
// answer, the second accepts alice, the MSK from its MPPE keys keys the
// AUTH payloads (charon verifies ours, we verify its), and the virtual IP
// is the Framed-IP-Address RADIUS assigned, not one of the pool's; ping
// crosses the child. FreeRADIUS's detail file has Accounting-On, the
// session's Start and, after charon's delete, its Stop with the ping's
// bytes and packets each way and cause User-Request. Then a wrong
// password: Access-Reject, charon's IKE_AUTH fails with
// AUTHENTICATION_FAILED, counted with reason radius_reject, and no SA
// stays. Then EAP-TLS with FreeRADIUS's certificate for alice: the
// address from RADIUS again, a ping, and a Start and Stop of its own
// session in the detail file. The daemon's stop sends Accounting-Off.
func TestIKECharonRADIUS(t *testing.T) {
	charontest.Require(t)
	p := newPair(t)
	fr := radiustest.Start(t, radiustest.Options{NetNS: p.a.name, Secret: "a shared secret of the test", TLSNames: []string{"a.test"}, Users: []radiustest.User{
		{Name: "alice", Password: "alice-mschapv2-pw", Reply: [][2]string{{"Framed-IP-Address", "10.3.0.200"}}},
	}})
	dir := t.TempDir()
	caFile, cert, key := raPKI(t, dir)
	p.b.mustRun(t, "ip", "route", "add", "default", "via", underlayA4)
	ch := charontest.Start(t, p.b.name, "")
	swanctlDir := filepath.Join(dir, "swanctl")
	if err := os.MkdirAll(filepath.Join(swanctlDir, "x509ca"), 0o700); err != nil {
		t.Fatal(err)
	}
	load := func(password string) {
		conn := charontest.Conn{LocalAddrs: underlayB4, RemoteAddrs: underlayA4, Proposals: "aes256-sha256-x25519", Encap: true,
			Local: charontest.Peer{Auth: "eap-mschapv2", ID: "b.test", EAPID: "alice"}, Remote: charontest.Peer{Auth: "pubkey", ID: "a.test", CACerts: caFile},
			VIPs: "0.0.0.0", RemoteTS: "198.51.100.0/24", ESP: "aes128gcm16", EAPSecret: password}
		ch.LoadDir(conn.String(), swanctlDir)
	}
	load("alice-mschapv2-pw")
	d := startDaemon(t, p.a, radiusGateway(cert, key, "127.0.0.1:9", fr.Auth, fr.Acct, fr.Secret))

	start := time.Now()
	if out, err := ch.Swanctl("--initiate", "--child", "net", "--timeout", "20"); err != nil {
		t.Fatalf("swanctl --initiate: %v\n%s", err, out)
	}
	took := time.Since(start)
	s := d.waitIKE("alice's child", anyChild)
	if s.RemoteEAPID != "alice" || fmt.Sprint(s.RemoteVIPs) != "[10.3.0.200]" || fmt.Sprint(s.Children[0].RemoteTS) != "[10.3.0.200/32]" {
		t.Fatalf("ike list: EAP identity %q, virtual IPs %v, remote_ts %v; want alice, RADIUS's 10.3.0.200 and 10.3.0.200/32", s.RemoteEAPID, s.RemoteVIPs, s.Children[0].RemoteTS)
	}
	if out, _ := p.b.run("ip", "addr", "show", "dev", "ipsec0"); !strings.Contains(out, "10.3.0.200/32") {
		t.Fatalf("charon's ipsec0 has no 10.3.0.200:\n%s", out)
	}
	ping(t, p.b, "198.51.100.1", 3)
	log := ch.LogSince(0)
	for _, want := range []string{"INTERNAL_IP4_DNS", "authentication of 'a.test' with ECDSA_WITH_SHA256_DER successful", "EAP method EAP_MSCHAPV2 succeeded, MSK established"} {
		if !strings.Contains(log, want) {
			t.Errorf("charon's log does not say %q", want)
		}
	}
	if n := strings.Count(fr.Log(), "Sent Access-Accept"); n != 1 {
		t.Errorf("FreeRADIUS sent %d Access-Accepts; want 1", n)
	}
	if !strings.Contains(d.log.String(), "server not answering") {
		t.Errorf("the daemon did not log the dead first server")
	}
	t.Logf("up through the second RADIUS server in %v (the first's 0.2 + 0.28 s included)", took)
	if out, err := ch.Swanctl("--terminate", "--ike", "test", "--timeout", "10"); err != nil {
		t.Fatalf("swanctl --terminate: %v\n%s", err, out)
	}
	recs := waitDetail(t, fr, 3)
	on, begin, stop := recs[0], recs[1], recs[2]
	if on["Acct-Status-Type"] != "Accounting-On" || begin["Acct-Status-Type"] != "Start" || stop["Acct-Status-Type"] != "Stop" {
		t.Fatalf("accounting records %v; want Accounting-On, Start, Stop", recs)
	}
	for _, r := range []map[string]string{begin, stop} {
		if r["User-Name"] != "alice" || r["Framed-IP-Address"] != "10.3.0.200" || r["Acct-Session-Id"] != begin["Acct-Session-Id"] || len(r["Acct-Session-Id"]) != 32 {
			t.Errorf("%s record: User-Name %q, Framed-IP-Address %q, Acct-Session-Id %q; want alice, 10.3.0.200, the SPIs", r["Acct-Status-Type"], r["User-Name"], r["Framed-IP-Address"], r["Acct-Session-Id"])
		}
	}
	// 3 pings of 84 bytes each way, at least.
	for _, k := range []string{"Acct-Input-Packets", "Acct-Output-Packets"} {
		if n, _ := strconv.Atoi(stop[k]); n < 3 {
			t.Errorf("Stop: %s = %q; want at least the 3 pings", k, stop[k])
		}
	}
	if n, _ := strconv.Atoi(stop["Acct-Input-Octets"]); n < 3*84 || stop["Acct-Terminate-Cause"] != "User-Request" {
		t.Errorf("Stop: Acct-Input-Octets %q, Acct-Terminate-Cause %q; want at least 252 and User-Request", stop["Acct-Input-Octets"], stop["Acct-Terminate-Cause"])
	}
	t.Logf("Stop: in %s octets / %s packets, out %s / %s, %s s", stop["Acct-Input-Octets"], stop["Acct-Input-Packets"], stop["Acct-Output-Octets"], stop["Acct-Output-Packets"], stop["Acct-Session-Time"])

	load("not-alices-password")
	if out, err := ch.Swanctl("--initiate", "--child", "net", "--timeout", "20"); err == nil {
		t.Fatalf("swanctl --initiate with a wrong password succeeded:\n%s", out)
	}
	if log := ch.LogSince(0); !strings.Contains(log, "received AUTHENTICATION_FAILED notify error") {
		t.Errorf("charon's log does not show AUTHENTICATION_FAILED")
	}
	if !strings.Contains(fr.Log(), "Sent Access-Reject") {
		t.Errorf("FreeRADIUS sent no Access-Reject")
	}
	// Counted by reason, and logged with it.
	body := scrape(t, p.a, "http://"+ikeMetricsAddr+"/metrics")
	for _, w := range []string{`ipsecd_ike_eap_failures_total{reason="radius_reject"} 1`, `ipsecd_ike_eap_failures_total{reason="radius_timeout"} 0`,
		`ipsecd_ike_eap_total{method="EAP-MSCHAPv2",result="failed"} 1`, `ipsecd_ike_eap_total{method="EAP-MSCHAPv2",result="succeeded"} 1`,
		`ipsecd_ike_auth_failures_total 1`} {
		if !strings.Contains(body, "\n"+w+"\n") {
			t.Errorf("metrics lack %s", w)
		}
	}
	if !strings.Contains(d.log.String(), "reason=radius_reject") {
		t.Errorf("the daemon did not log the reject's reason")
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(d.ikeList()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("an IKE SA stays after the reject: %+v", d.ikeList())
		}
		time.Sleep(100 * time.Millisecond)
	}

	// EAP-TLS: charon's certificate for alice, FreeRADIUS's naming the
	// gateway too (charon checks the AAA server's against the gateway's
	// IKE identity unless aaa_id says otherwise), the TLS flights in
	// EAP-Messages split over RADIUS attributes and IKE_AUTH rounds, the
	// 64-byte MSK from the MPPE keys keying AUTH both ways.
	for _, f := range []struct{ src, dst string }{
		{fr.PKI.CAFile, "x509ca/radius-ca.pem"}, {fr.PKI.ClientCertFile, "x509/alice.pem"}, {fr.PKI.ClientKeyFile, "pkcs8/alice.key"},
	} {
		b, err := os.ReadFile(f.src)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(swanctlDir, f.dst)
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tlsConn := charontest.Conn{LocalAddrs: underlayB4, RemoteAddrs: underlayA4, Proposals: "aes256-sha256-x25519", Encap: true,
		Local:  charontest.Peer{Auth: "eap-tls", ID: "alice", Certs: "alice.pem"},
		Remote: charontest.Peer{Auth: "pubkey", ID: "a.test", CACerts: caFile},
		VIPs:   "0.0.0.0", RemoteTS: "198.51.100.0/24", ESP: "aes128gcm16"}
	ch.LoadDir(tlsConn.String(), swanctlDir)
	from := ch.LogSize()
	if out, err := ch.Swanctl("--initiate", "--child", "net", "--timeout", "20"); err != nil {
		t.Fatalf("EAP-TLS: swanctl --initiate: %v\n%s\n%s", err, out, ch.LogSince(from))
	}
	s = d.waitIKE("alice's EAP-TLS child", anyChild)
	if s.RemoteEAPID != "alice" || fmt.Sprint(s.RemoteVIPs) != "[10.3.0.200]" {
		t.Fatalf("EAP-TLS: ike list: EAP identity %q, virtual IPs %v; want alice and 10.3.0.200", s.RemoteEAPID, s.RemoteVIPs)
	}
	if log := ch.LogSince(from); !strings.Contains(log, "EAP method EAP_TLS succeeded, MSK established") {
		t.Errorf("charon's log does not say EAP-TLS established an MSK")
	}
	ping(t, p.b, "198.51.100.1", 2)
	if body := scrape(t, p.a, "http://"+ikeMetricsAddr+"/metrics"); !strings.Contains(body, "\n"+`ipsecd_ike_eap_total{method="EAP-TLS",result="succeeded"} 1`+"\n") {
		t.Errorf("metrics do not count the EAP-TLS login")
	}
	if out, err := ch.Swanctl("--terminate", "--ike", "test", "--timeout", "10"); err != nil {
		t.Fatalf("swanctl --terminate: %v\n%s", err, out)
	}
	// Its Start and Stop, of their own session, with the address RADIUS
	// gave and the ping's packets.
	recs = waitDetail(t, fr, 5)
	tlsBegin, tlsStop := recs[3], recs[4]
	if tlsBegin["Acct-Status-Type"] != "Start" || tlsStop["Acct-Status-Type"] != "Stop" {
		t.Fatalf("EAP-TLS: accounting records %v; want its Start and Stop", recs[3:])
	}
	for _, r := range []map[string]string{tlsBegin, tlsStop} {
		if r["User-Name"] != "alice" || r["Framed-IP-Address"] != "10.3.0.200" || r["Acct-Session-Id"] != tlsBegin["Acct-Session-Id"] || r["Acct-Session-Id"] == begin["Acct-Session-Id"] {
			t.Errorf("EAP-TLS: %s record: User-Name %q, Framed-IP-Address %q, Acct-Session-Id %q; want alice, 10.3.0.200, a session other than the first's", r["Acct-Status-Type"], r["User-Name"], r["Framed-IP-Address"], r["Acct-Session-Id"])
		}
	}
	if n, _ := strconv.Atoi(tlsStop["Acct-Output-Packets"]); n < 2 || tlsStop["Acct-Terminate-Cause"] != "User-Request" {
		t.Errorf("EAP-TLS: Stop: Acct-Output-Packets %q, Acct-Terminate-Cause %q; want the 2 pings at least and User-Request", tlsStop["Acct-Output-Packets"], tlsStop["Acct-Terminate-Cause"])
	}

	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	if recs := waitDetail(t, fr, 6); len(recs) != 6 || recs[5]["Acct-Status-Type"] != "Accounting-Off" {
		t.Errorf("after the stop: %d records, the last %v; want 6, Accounting-Off last (no session for the rejected attempt)", len(recs), recs[len(recs)-1])
	}
}

// waitDetail waits until FreeRADIUS's detail file has n records.
func waitDetail(t *testing.T, fr *radiustest.Server, n int) []map[string]string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		recs := fr.Detail(t)
		if len(recs) >= n {
			return recs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d accounting records after 10 s; want %d: %v", len(recs), n, recs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
