//go:build linux

package integration

import (
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/internal/charontest"
)

// tlsVersions is strongswan.conf's charon section pinning charon's TLS
// stack to version v (its default is TLS 1.2 at most), and logging its
// TLS steps at level 2, where the success indication shows (the
// filelog section merges with charontest's).
func tlsVersions(v string) string {
	return "  tls {\n    version_min = " + v + "\n    version_max = " + v + "\n  }\n" +
		"  filelog {\n    test {\n      tls = 2\n    }\n  }\n"
}

// noCertreqAuthorities keeps a charon TLS server from sending the
// certificate_authorities extension in its TLS 1.3 CertificateRequest:
// charon lists only RSA CAs there, so with the tests' ECDSA CA it sends
// the extension empty, which RFC 8446 §4.2.4 forbids
// (authorities<3..2^16-1>) and crypto/tls refuses ("error decoding
// message").
const noCertreqAuthorities = "  tls {\n    send_certreq_authorities = no\n  }\n"

// TestIKECharon61EAPTLS: EAP-TLS with strongSwan 6.1's charon (the sid
// chroot's, eap-tls plugin of libcharon-extra-plugins), whose TLS 1.3
// follows RFC 9190: the MSK from the exporter "EXPORTER_EAP_TLS_Key_Material"
// with context 0x0D, and the server's one-byte 0x00 success indication
// inside TLS (§2.5), which charon's client demands ("missing protected
// success indication") and its server sends. Each side keys its AUTH
// with the MSK it derived itself, so an IKE SA proves both MSKs equal.
// Both roles, TLS 1.3 and TLS 1.2 (charon pinned to one version):
// charon as the road warrior of the real binary's gateway (virtual IP,
// ping, a checksummed 1 MiB TCP stream; ike list and the metrics name
// EAP-TLS), and the real binary as the road warrior of charon's gateway
// (by certificate AUTH, and by EAP-only, RFC 5998). charon's TLS 1.3
// gateway needs send_certreq_authorities = no with the tests' ECDSA CA
// (noCertreqAuthorities); the last subtest shows why.
func TestIKECharon61EAPTLS(t *testing.T) {
	charontest.RequireSid(t)
	for _, v := range []string{"1.3", "1.2"} {
		t.Run("TLS "+v+"/charon client", func(t *testing.T) {
			p := newPair(t)
			pki := writePKI(t, t.TempDir(), "ipsecd RA test CA", false, pkiLeaf{"gw", "a.test"}, pkiLeaf{"carol", "carol.test"})
			rw := newCertRoadWarrior(t, charontest.StartSid, p.b, underlayB4, "eap-tls", "pubkey", "carol.test", pki["carol.pem"], pki["carol.key"], pki["ca.pem"], tlsVersions(v))
			d := startDaemon(t, p.a, eapTLSGateway(pki["gw.pem"], pki["gw.key"], pki["ca.pem"], "pubkey", "eap-tls"))
			rw.up(t, d, "EAP-TLS "+v, "carol.test", "10.3.0.1")
			ping(t, p.b, "198.51.100.1", 3)
			tcpTransfer(t, p.b, p.a, "198.51.100.1", 1<<20)
			want := []string{"negotiated TLS " + v, "EAP method EAP_TLS succeeded, MSK established", "authentication of 'a.test' with EAP successful"}
			if v == "1.3" {
				want = append(want, "received protected success indication via TLS")
			}
			checkLog(t, "charon's", rw.ch.LogSince(0), want...)
			if out, _ := d.ctl("ike", "list"); !strings.Contains(out, "remote EAP identity 'carol.test', virtual IPs 10.3.0.1") || !strings.Contains(out, "remote auth eap-tls") {
				t.Errorf("ike list does not show carol.test by eap-tls:\n%s", out)
			}
			waitMetrics(t, p.a, `ipsecd_ike_eap_total{method="EAP-TLS",result="succeeded"} 1`)
			rw.down(t, d, "carol.test")
		})
		for _, gw := range []string{"pubkey", "eap"} {
			t.Run("TLS "+v+"/charon gateway "+gw, func(t *testing.T) {
				extra := tlsVersions(v)
				if v == "1.3" {
					extra += noCertreqAuthorities
				}
				ch, _ := eapTLSClient(t, charontest.StartSid, extra, gw)
				want := []string{"negotiated TLS " + v, "EAP method EAP_TLS succeeded, MSK established", "authentication of 'carol.test' with EAP successful"}
				if v == "1.3" {
					want = append(want, "sending protected success indication via TLS")
				}
				checkLog(t, "charon's", ch.LogSince(0), want...)
			})
		}
	}
	// What noCertreqAuthorities avoids: charon's default CertificateRequest
	// of TLS 1.3 with an ECDSA CA fails the handshake in our client, which
	// says what crypto/tls found.
	t.Run("TLS 1.3/charon gateway with empty certificate_authorities", func(t *testing.T) {
		_, ch, d := startEAPTLSClient(t, charontest.StartSid, tlsVersions("1.3"), "pubkey")
		d.waitLog(t, `EAP-TLS of \"carol.test\" failed: TLS: local error: tls: error decoding message`)
		checkLog(t, "charon's", ch.LogSince(0), "sending extension: certificate authorities")
	})
}

// checkLog reports each of want that log (whose is named by what) lacks.
func checkLog(t *testing.T, what, log string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(log, w) {
			t.Errorf("%s log lacks %q", what, w)
		}
	}
}
