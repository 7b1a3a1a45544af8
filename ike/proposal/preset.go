package proposal

import (
	"fmt"

	"github.com/ipsecd/ipsecd/ike/message"
)

// Preset is a named set of proposals that a site-to-site VPN of a cloud
// provider accepts in its published default configuration, limited to
// the algorithms ipsecd implements and ordered strongest first. A preset's
// name stands in a proposal list where a proposal string may, as
// swanctl's keyword "default" does: proposals: [aws] expands to IKE,
// esp_proposals: [aws] to ESP.
type Preset struct {
	Name     string
	IKE, ESP []string // proposal strings, as Parse takes them
	// Why says, for a preset with a legacy algorithm, why the provider
	// needs it.
	Why string
	// Source is the provider's page the proposals come from.
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
// proposal string for Parse.
func Expand(proto message.ProtocolID, s string) ([]Proposal, error) {
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
	}
	ps, err := ParseList(proto, ss)
	if err != nil {
		panic(fmt.Sprintf("proposal: preset %s: %v", pr.Name, err))
	}
	return ps, nil
}
