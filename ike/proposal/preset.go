package proposal

import (
	"fmt"
	"slices"

	"github.com/ipsecd/ipsecd/ike/message"
)

// Preset is a named set of proposals that a peer accepts or offers in
// its published default configuration (a cloud provider's site-to-site
// VPN, or the IKEv2 client built into an operating system), limited to
// the algorithms ipsecd implements and ordered strongest first. A preset's
// name stands in a proposal list where a proposal string may, as
// swanctl's keyword "default" does: proposals: [aws] expands to IKE,
// esp_proposals: [aws] to ESP.
type Preset struct {
	Name     string
	IKE, ESP []string // proposal strings, as Parse takes them
	// LegacyIKE are IKE proposals with a legacy algorithm that the
	// preset adds only where the connection allows legacy algorithms
	// (allow_legacy), after IKE: what an unmodified client offers when
	// nothing better can be had.
	LegacyIKE []string
	// Why says, for a preset with a legacy algorithm (in IKE or
	// LegacyIKE), why the peer needs it.
	Why string
	// Source is the vendor's page the proposals come from.
	Source string
}

// presets are the built-in presets; docs/config.md explains each.
var presets = []Preset{
	{
		// Accepted by default: AES128, AES256, AES128-GCM-16,
		// AES256-GCM-16; SHA1, SHA2-256/384/512; phase 1 groups 2 and
		// 14-24, phase 2 (PFS) groups 2, 5 and 14-24. AWS picks the
		// lowest value it accepts whatever our order, so no group below
		// 14 is offered; AWS asks for PFS on phase 2.
		Name: "aws",
		IKE: []string{
			"aes256gcm16-aes128gcm16-prfsha512-prfsha384-prfsha256-ecp384-ecp256-modp2048",
			"aes256-aes128-sha512-sha384-sha256-ecp384-ecp256-modp2048",
		},
		ESP: []string{
			"aes256gcm16-aes128gcm16-ecp384-ecp256-modp2048",
			"aes256-aes128-sha256-ecp384-ecp256-modp2048",
		},
		Source: "https://docs.aws.amazon.com/vpn/latest/s2svpn/VPNTunnels.html",
	},
	{
		// Cloud VPN proposes and selects in the order of its cipher
		// tables: groups x25519, ecp256, ecp384, ..., modp2048; PRFs
		// SHA2-256, 384, 512; AES-GCM and AES-CBC. Its phase 2 table
		// lists PFS groups; our rekeys use PFS, and the last two
		// proposals accept a rekey of Cloud VPN's without it.
		Name: "gcp",
		IKE: []string{
			"aes256gcm16-aes128gcm16-prfsha256-prfsha384-prfsha512-x25519-ecp256-ecp384-modp2048",
			"aes256-aes128-sha256-sha384-sha512-x25519-ecp256-ecp384-modp2048",
		},
		ESP: []string{
			"aes256gcm16-aes128gcm16-x25519-ecp256-ecp384-modp2048",
			"aes256-aes128-sha256-x25519-ecp256-ecp384-modp2048",
			"aes256gcm16-aes128gcm16",
			"aes256-aes128-sha256",
		},
		Source: "https://cloud.google.com/network-connectivity/docs/vpn/concepts/supported-ike-ciphers",
	},
	{
		// The default policy's IKEv2 main mode offers AES256 and AES128
		// with SHA1 or SHA256, and DH group 2 only; its quick mode,
		// as initiator, GCM-AES256, AES256-SHA1, AES256-SHA256 and
		// AES128-SHA1, all without PFS.
		Name:   "azure",
		IKE:    []string{"aes256-aes128-sha256-modp1024"},
		ESP:    []string{"aes256gcm16", "aes256-aes128-sha256"},
		Why:    "Azure VPN gateway's default policy offers DH group 2 (modp1024) only in IKE",
		Source: "https://learn.microsoft.com/en-us/azure/vpn-gateway/vpn-gateway-about-compliance-crypto",
	},
	{
		// Windows 7 to 11 offer AES-CBC 128/192/256 and 3DES with
		// SHA1, SHA2-256 and SHA2-384, and Windows 11 AES-GCM 128/256,
		// all with DH group 2 only; the registry value
		// NegotiateDH2048_AES256 adds (1) or forces (2) AES256-CBC with
		// group 14. Set-VpnConnectionIPsecConfiguration (what
		// ipsecd profile windows writes) sets one of GCMAES128/256 or
		// AES128/256 with SHA256/384 and group 14, ECP256 or ECP384,
		// and for ESP GCM-AES or AES-CBC with SHA256-128 and a PFS
		// group or none. Microsoft does not publish the defaults;
		// strongSwan's page on Windows clients lists them. Windows'
		// default ESP integrity is SHA1 only (AES-CBC, no PFS): the last
		// proposal takes it, after those with SHA-2, so that a client
		// offering both gets SHA-2.
		Name: "windows",
		IKE: []string{
			"aes256gcm16-aes128gcm16-prfsha384-prfsha256-ecp384-ecp256-modp2048",
			"aes256-aes128-sha384-sha256-ecp384-ecp256-modp2048",
		},
		LegacyIKE: []string{
			"aes256gcm16-aes128gcm16-prfsha384-prfsha256-modp1024",
			"aes256-aes128-sha384-sha256-modp1024",
		},
		ESP: []string{
			"aes256gcm16-aes128gcm16-ecp384-ecp256-modp2048",
			"aes256-aes128-sha256-ecp384-ecp256-modp2048",
			"aes256gcm16-aes128gcm16",
			"aes256-aes128-sha256",
			"aes256-aes128-sha1",
		},
		Why:    "Windows' built-in IKEv2 client offers only DH group 2 (modp1024) unless the registry value NegotiateDH2048_AES256 or Set-VpnConnectionIPsecConfiguration (ipsecd profile windows) says otherwise",
		Source: "https://docs.strongswan.org/docs/latest/interop/windowsClients.html",
	},
	{
		// Since iOS 14 and macOS 11 an IKEv2 configuration defaults to
		// AES-256, SHA2-256 and group 14 for the IKE SA and the child
		// (AES-256-GCM on tvOS), PFS off. Configured in Settings, iOS
		// 16.5 offers AES256-SHA256 with group 14, ECP256 or group 5,
		// then AES128-SHA1 and 3DES-SHA1 with group 2 (which ipsecd
		// does not run); iOS rekeys a child offering its IKE group and
		// no group, macOS no group.
		Name: "apple",
		IKE: []string{
			"aes256gcm16-prfsha256-ecp256-modp2048",
			"aes256-sha256-ecp256-modp2048",
		},
		ESP: []string{
			"aes256gcm16-ecp256-modp2048",
			"aes256-sha256-ecp256-modp2048",
			"aes256gcm16",
			"aes256-sha256",
		},
		Source: "https://developer.apple.com/documentation/networkextension/nevpnikev2securityassociationparameters",
	},
	{
		// Android 11 and later (Ikev2VpnProfile, AOSP's VpnIkev2Utils)
		// offer AES-CTR and AES-CBC 256/192/128 with HMAC-SHA2-512,
		// 384, 256, AES-XCBC, AES-CMAC, and ChaCha20-Poly1305 and
		// AES-GCM 256/192/128 with 16, 12 and 8-byte ICVs; groups
		// modp4096, curve25519, modp3072, modp2048; the child the same
		// ciphers without PFS. The strongSwan app offers charon's
		// default proposals, which the same preset meets.
		Name: "android",
		IKE: []string{
			"aes256gcm16-chacha20poly1305-aes128gcm16-prfsha512-prfsha384-prfsha256-x25519-modp2048",
			"aes256-aes128-sha512-sha384-sha256-x25519-modp2048",
		},
		ESP: []string{
			"aes256gcm16-chacha20poly1305-aes128gcm16",
			"aes256-aes128-sha256",
		},
		Source: "https://android.googlesource.com/platform/frameworks/base/+/refs/heads/main/services/core/java/com/android/server/connectivity/VpnIkev2Utils.java",
	},
}

// Presets returns the built-in presets.
func Presets() []Preset { return append([]Preset(nil), presets...) }

// LookupPreset returns the preset named name.
func LookupPreset(name string) (Preset, bool) {
	for _, p := range presets {
		if p.Name == name {
			return p, true
		}
	}
	return Preset{}, false
}

// Expand parses one item of a proposal list for proto (ProtoIKE or
// ProtoESP): a preset's name gives its proposals, anything else is a
// proposal string for Parse. It is ExpandLegacy without legacy.
func Expand(proto message.ProtocolID, s string) ([]Proposal, error) {
	return ExpandLegacy(proto, s, false)
}

// ExpandLegacy is Expand for a connection that allows legacy algorithms
// (allowLegacy) or not: a preset's LegacyIKE proposals follow its IKE
// proposals only when it does.
func ExpandLegacy(proto message.ProtocolID, s string, allowLegacy bool) ([]Proposal, error) {
	pr, ok := LookupPreset(s)
	if !ok {
		p, err := Parse(proto, s)
		if err != nil {
			return nil, err
		}
		return []Proposal{p}, nil
	}
	ss := pr.ESP
	if proto == message.ProtoIKE {
		ss = pr.IKE
		if allowLegacy {
			ss = append(slices.Clip(ss), pr.LegacyIKE...)
		}
	}
	ps, err := ParseList(proto, ss)
	if err != nil {
		panic(fmt.Sprintf("proposal: preset %s: %v", pr.Name, err))
	}
	return ps, nil
}
