//go:build linux

package ike

import (
	"errors"
	"fmt"
	"slices"
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

// TestCharonClientPresets negotiates each native-client preset with a
// charon that stands for the client: it initiates with the proposals the
// vendor's client sends (as docs/config.md cites them; what strongSwan
// cannot write, AES-CTR, AES-XCBC, AES-CMAC and GCM with 8 or 12-byte
// ICVs, left out), ipsecd responds with the preset, and the IKE SA and
// its child come up with the keys charon derived; then the client
// rekeys the child as it does (with or without PFS) and we rekey it too.
// windows without allow_legacy meets only a client told to use group 14
// or better (the registry value or Set-VpnConnectionIPsecConfiguration).
func TestCharonClientPresets(t *testing.T) {
	ch, d := charonPair(t)
	for _, tc := range []struct {
		name, preset string
		allowLegacy  bool
		ike, esp     string
		group        string // the IKE group ipsecd must pick
	}{
		// Windows 7 to 11 by default: ESP integrity SHA1 only (DES
		// and NULL, which charon does not build, left out).
		{"windows-default", "windows", true, "3des-aes128-aes192-aes256-sha1-sha256-sha384-modp1024", "aes256-aes128-3des-sha1", "modp1024"},
		// ESP as Set-VpnConnectionIPsecConfiguration
		// -CipherTransformConstants AES256
		// -AuthenticationTransformConstants SHA256128 sets it.
		{"windows-esp-sha256", "windows", true, "3des-aes128-aes192-aes256-sha1-sha256-sha384-modp1024", "aes256-sha256", "modp1024"},
		// Windows 11 by default also offers AES-GCM, with group 2.
		{"windows11-gcm", "windows", true, "aes128gcm16-aes256gcm16-prfsha1-prfsha256-prfsha384-modp1024, 3des-aes128-aes192-aes256-sha1-sha256-sha384-modp1024", "aes256gcm16", "modp1024"},
		// NegotiateDH2048_AES256 = 2.
		{"windows-dh2048", "windows", false, "aes256-sha1-sha256-sha384-modp2048", "aes256-sha256", "modp2048"},
		// What ipsecd profile windows sets: GCMAES256, SHA384, ECP384,
		// PFS ECP384.
		{"windows-profile", "windows", false, "aes256gcm16-prfsha384-ecp384", "aes256gcm16-ecp384", "ecp384"},
		// iOS 16.5 configured in Settings, rekeying with its IKE group
		// and without one.
		{"ios-settings", "apple", false,
			"aes256-sha256-modp2048, aes256-sha256-ecp256, aes256-sha256-modp1536, aes128-sha1-modp1024, 3des-sha1-modp1024",
			"aes256-sha256-modp2048, aes256-sha256, aes128-sha1, 3des-sha1", "modp2048"},
		// macOS 13.4 configured in System Settings: no group on rekey.
		{"macos-settings", "apple", false,
			"aes256-sha256-modp2048, aes256-sha256-modp1536, aes128-sha1-modp1024, 3des-sha1-modp1024",
			"aes256-sha256, aes128-sha1, 3des-sha1", "modp2048"},
		// A configuration profile's defaults (iOS 14, macOS 11 on),
		// and tvOS's AES-256-GCM.
		{"apple-profile", "apple", false, "aes256-sha256-modp2048", "aes256-sha256", "modp2048"},
		{"tvos-profile", "apple", false, "aes256gcm16-prfsha256-modp2048", "aes256gcm16", "modp2048"},
		// Android 11 and later, VpnIkev2Utils' two proposals each.
		{"android", "android", false,
			"aes256-aes192-aes128-sha512-sha384-sha256-prfsha512-prfsha384-prfsha256-prfsha1-modp4096-curve25519-modp3072-modp2048, " +
				"chacha20poly1305-aes256gcm16-aes192gcm16-aes128gcm16-prfsha512-prfsha384-prfsha256-prfsha1-modp4096-curve25519-modp3072-modp2048",
			"aes256-aes192-aes128-sha512-sha384-sha256, chacha20poly1305-aes256gcm16-aes192gcm16-aes128gcm16", "curve25519"},
		// The strongSwan app: charon's default proposals.
		{"strongswan-app", "android", false, "default", "default", "curve25519"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loadTest(ch, tc.ike, tc.esp)
			cfg := peerConfig(t, "aes256-sha256-x25519", "aes128gcm16")
			cfg.Proposals, _ = proposal.ExpandLegacy(message.ProtoIKE, tc.preset, tc.allowLegacy)
			cfg.Child.Proposals, _ = proposal.Expand(message.ProtoESP, tc.preset)
			d.establishChecked(t, ch, cfg, "responder")
			s, c := d.sa.Suite(), d.sa.Children()[0].Suite
			t.Logf("IKE %s-%s-%s-%s, ESP %s-%s", s.Encr.Name, s.Integ.Name, s.PRF.Name, s.DH.Name, c.Encr.Name, c.Integ.Name)
			if g := charonGroups[int(s.DH.ID)]; g != tc.group {
				t.Errorf("IKE group %s, want %s", g, tc.group)
			}
			for _, ours := range []bool{false, true} {
				d.rekeyChild(t, ch, ours)
			}
			d.while(t, ch, func() bool { return d.sa.State() == StateDeleted }, "--terminate", "--ike", "test", "--timeout", "10")
		})
	}
	// Without allow_legacy the windows preset refuses Windows' default
	// group 2 with NO_PROPOSAL_CHOSEN.
	t.Run("windows-default-without-allow_legacy", func(t *testing.T) {
		loadTest(ch, "3des-aes128-aes192-aes256-sha1-sha256-sha384-modp1024", "aes256-sha256")
		cfg := peerConfig(t, "aes256-sha256-x25519", "aes128gcm16")
		cfg.Proposals, _ = proposal.Expand(message.ProtoIKE, "windows")
		cfg.Child.Proposals, _ = proposal.Expand(message.ProtoESP, "windows")
		d.fail(t, ch, cfg, "responder", func() bool {
			return slices.ContainsFunc(d.errs, func(err error) bool { return errors.Is(err, ErrNoProposalChosen) })
		})
	})
}
