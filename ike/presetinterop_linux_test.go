//go:build linux

package ike

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/ike/dh"
	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/ike/proposal"
)

// charonGroups writes DH group numbers as strongSwan names them.
var charonGroups = map[int]string{2: "modp1024", 5: "modp1536", 14: "modp2048", 15: "modp3072", 16: "modp4096",
	17: "modp6144", 18: "modp8192", 19: "ecp256", 20: "ecp384", 21: "ecp521", 22: "modp1024s160",
	23: "modp2048s224", 24: "modp2048s256", 31: "curve25519"}

func groupNames(nums ...int) string {
	var s []string
	for _, n := range nums {
		s = append(s, charonGroups[n])
	}
	return strings.Join(s, "-")
}

// TestCharonPresets negotiates each cloud preset with a charon that
// stands for the cloud gateway: it offers and accepts the provider's
// published defaults, as far as strongSwan's proposal strings express
// them (3DES and MD5 left out), in the provider's order. With ipsecd as
// initiator and as responder the IKE SA and its child come up with the
// keys charon derived, and a child rekey from each side agrees on PFS as
// the gateway does (PFS for aws and gcp, none for azure, whose gateway
// offers none as initiator; gcp also without PFS, should Cloud VPN
// rekey without it: our rekey then uses PFS only when charon accepts
// it, which this charon does not).
func TestCharonPresets(t *testing.T) {
	ch, d := charonPair(t)
	aws1, aws2 := groupNames(2, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24), groupNames(2, 5, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24)
	gcp := groupNames(31, 19, 20, 21, 15, 16, 17, 18, 14, 23, 24, 5, 2)
	for _, tc := range []struct {
		preset, ike, esp string
		pfs              bool
	}{
		// AWS accepts the lowest value first, whatever the order of
		// the proposal (docs.aws.amazon.com/vpn/latest/s2svpn/VPNTunnels.html).
		{"aws",
			"aes128-aes256-sha1-sha256-sha384-sha512-" + aws1 + ", aes128gcm16-aes256gcm16-prfsha1-prfsha256-prfsha384-prfsha512-" + aws1,
			"aes128-aes256-sha1-sha256-sha384-sha512-" + aws2 + ", aes128gcm16-aes256gcm16-" + aws2, true},
		// Cloud VPN's cipher tables, in its documented group and PRF order.
		{"gcp",
			"aes256gcm16-aes192gcm16-aes128gcm16-prfsha256-prfsha384-prfsha512-prfsha1-" + gcp + ", aes256-aes192-aes128-sha256-sha384-sha512-sha1-" + gcp,
			"aes256gcm16-aes192gcm16-aes128gcm16-" + gcp + ", aes256-aes192-aes128-sha256-sha384-sha512-sha1-" + gcp, true},
		// The same gateway rekeying without PFS.
		{"gcp",
			"aes256gcm16-aes192gcm16-aes128gcm16-prfsha256-prfsha384-prfsha512-prfsha1-" + gcp,
			"aes256gcm16-aes192gcm16-aes128gcm16", false},
		// Azure's default policy, offers in its order: group 2 only, no PFS.
		{"azure",
			"aes256-sha1-modp1024, aes256-sha256-modp1024, aes128-sha1-modp1024, aes128-sha256-modp1024",
			"aes256gcm16, aes256-sha1, aes256-sha256, aes128-sha1", false},
	} {
		loadTest(ch, tc.ike, tc.esp)
		cfg := peerConfig(t, "aes256-sha256-x25519", "aes128gcm16")
		cfg.Proposals, _ = proposal.Expand(message.ProtoIKE, tc.preset)
		cfg.Child.Proposals, _ = proposal.Expand(message.ProtoESP, tc.preset)
		for _, role := range []string{"initiator", "responder"} {
			t.Run(fmt.Sprintf("%s/pfs=%t/%s", tc.preset, tc.pfs, role), func(t *testing.T) {
				d.establishChecked(t, ch, cfg, role)
				s, c := d.sa.Suite(), d.sa.Children()[0].Suite
				t.Logf("IKE %s-%s-%s-%s, ESP %s-%s", s.Encr.Name, s.Integ.Name, s.PRF.Name, s.DH.Name, c.Encr.Name, c.Integ.Name)
				if (s.DH.ID == dh.MODP1024) != (tc.preset == "azure") {
					t.Errorf("IKE group %s with preset %s", s.DH.Name, tc.preset)
				}

				for _, ours := range []bool{false, true} {
					d.rekeyChild(t, ch, ours)
					if pfs := d.sa.Children()[0].Suite.DH.Name; (pfs != "") != tc.pfs {
						t.Errorf("rekey (ours %t): PFS group %q, want PFS %t", ours, pfs, tc.pfs)
					}
				}
				d.listed(t, ch)
				d.while(t, ch, func() bool { return d.sa.State() == StateDeleted }, "--terminate", "--ike", "test", "--timeout", "10")
			})
		}
	}
}
