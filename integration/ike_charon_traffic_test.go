//go:build linux

package integration

import (
	"strings"
	"testing"
	"time"
)

// TestIKECharonProposals: ipsecd and charon negotiate the connection with
// each one initiating, for seven proposal sets, and ping and a
// checksummed TCP stream cross the tunnel both ways. The child is then
// rekeyed by ipsecd (with PFS where the ESP proposal names a group) and
// carries a ping again, and the initiator deletes the IKE SA.
func TestIKECharonProposals(t *testing.T) {
	for _, tc := range []struct{ name, ike, esp, charonESP string }{
		{"aes-cbc-sha256-x25519/aes128gcm16", "aes256-sha256-x25519", "aes128gcm16", "AES_GCM_16-128"},
		{"aes256gcm16-prfsha384-ecp384/chacha20poly1305-pfs", "aes256gcm16-prfsha384-ecp384", "chacha20poly1305-ecp384", "CHACHA20_POLY1305"},
		{"modp2048/aes256-sha256", "aes128-sha256-modp2048", "aes256-sha256", "AES_CBC-256/HMAC_SHA2_256_128"},
		// The other ESP integrity algorithms (sa's hmac(sha1),
		// hmac(sha384), hmac(sha512)), and AES-192.
		{"esp/aes128-sha1", "aes256-sha256-x25519", "aes128-sha1", "AES_CBC-128/HMAC_SHA1_96"},
		{"esp/aes256-sha384", "aes256-sha256-x25519", "aes256-sha384", "AES_CBC-256/HMAC_SHA2_384_192"},
		{"esp/aes256-sha512", "aes256-sha256-x25519", "aes256-sha512", "AES_CBC-256/HMAC_SHA2_512_256"},
		{"esp/aes192-sha1", "aes192-sha256-x25519", "aes192-sha1", "AES_CBC-192/HMAC_SHA1_96"},
	} {
		for _, initiator := range []string{"ipsecd", "charon"} {
			t.Run(tc.name+"/"+initiator, func(t *testing.T) {
				r := newIKERig(t, ikeSpec{ike: tc.ike, esp: tc.esp})
				first := r.up(t, initiator)
				if list := r.ch.ListSAs(); !strings.Contains(list, tc.charonESP) {
					t.Errorf("charon's child is not %s:\n%s", tc.charonESP, list)
				}
				ping(t, r.p.a, innerB4, 3)
				ping(t, r.p.b, innerA4, 3)
				tcpTransfer(t, r.p.a, r.p.b, innerB4, 1<<20)
				tcpTransfer(t, r.p.b, r.p.a, innerA4, 1<<20)
				r.checkIKEList(t, initiator == "ipsecd", first)

				r.ipsecdIKE(t, "rekey", "--child", "net")
				r.waitUp(t, "after ipsecd's child rekey", first)
				if pfs := strings.Contains(tc.esp, "-ecp"); pfs && !strings.Contains(r.ch.ListSAs(), "ECP_384") {
					t.Errorf("the rekeyed child has no PFS group ECP_384:\n%s", r.ch.ListSAs())
				}
				ping(t, r.p.a, innerB4, 2)

				if initiator == "ipsecd" {
					r.ipsecdIKE(t, "terminate", "--ike", "charon")
				} else {
					r.swanctl(t, "--terminate", "--ike", "test", "--timeout", "10")
				}
				r.waitDown(t, initiator+" deleting", 10*time.Second, true)
			})
		}
	}
}
