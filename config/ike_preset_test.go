package config

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/ike/proposal"
)

// TestIKEPresets: a preset's name in proposals: and esp_proposals:
// expands to its proposals (and may stand beside proposal strings); the
// azure preset's legacy group loads with a warning in the shape of an
// error, the others without one.
func TestIKEPresets(t *testing.T) {
	for _, name := range []string{"aws", "gcp", "azure"} {
		t.Run(name, func(t *testing.T) {
			text := ikeEdit(t, "proposals: [aes256-sha256-x25519, aes128gcm16-prfsha256-ecp256]", "proposals: ["+name+", aes128gcm16-prfsha256-ecp256]")
			text = strings.Replace(text, "esp_proposals: [aes128gcm16-x25519, chacha20poly1305]", "esp_proposals: ["+name+"]", 1)
			path := writeConfig(t, text)
			c, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			ike, _ := proposal.Expand(message.ProtoIKE, name)
			esp, _ := proposal.Expand(message.ProtoESP, name)
			cn := c.Connections[0]
			if got, want := fmt.Sprint(cn.Proposals), fmt.Sprint(append(ike, cn.Proposals[len(cn.Proposals)-1])); got != want || len(cn.Proposals) != len(ike)+1 {
				t.Errorf("proposals: got %s, want %s", got, want)
			}
			if got, want := fmt.Sprint(cn.Children[0].ESPProposals), fmt.Sprint(esp); got != want {
				t.Errorf("esp_proposals: got %s, want %s", got, want)
			}
			warned := slices.ContainsFunc(c.Warnings, func(w string) bool { return strings.Contains(w, "legacy") })
			if want := name == "azure"; warned != want {
				t.Fatalf("warned of a legacy group: %t, want %t; warnings: %q", warned, want, c.Warnings)
			}
			if name == "azure" {
				want := path + ":14: connections[0].proposals[0]: preset azure offers modp1024, a legacy group"
				if !slices.ContainsFunc(c.Warnings, func(w string) bool { return strings.HasPrefix(w, want) }) {
					t.Errorf("warnings %q, want one starting %q", c.Warnings, want)
				}
			}
		})
	}
}

// TestIKELegacyOptIn: a legacy group in a proposal string is refused,
// naming the way out, unless the connection says allow_legacy: true; then
// it loads with a warning.
func TestIKELegacyOptIn(t *testing.T) {
	text := ikeEdit(t, "proposals: [aes256-sha256-x25519,", "proposals: [aes256-sha256-modp1024,")
	path := writeConfig(t, text)
	_, err := Load(path)
	want := path + `:14: connections[0].proposals[0]: "aes256-sha256-modp1024" names modp1024, a legacy group (1024-bit MODP, about 80-bit strength); use a modern group (modp2048, ecp256, x25519), or set allow_legacy: true on the connection if the peer offers nothing else`
	if err == nil || !strings.Contains("\n"+err.Error()+"\n", "\n"+want+"\n") {
		t.Fatalf("got %v\nwant a line %s", err, want)
	}

	text = strings.Replace(text, "    proposals:", "    allow_legacy: true\n    proposals:", 1)
	path = writeConfig(t, text)
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Connections[0].AllowLegacy || c.Connections[0].Proposals[0].Legacy() == nil {
		t.Fatalf("allow_legacy: got %s", c.IKEConfig.String())
	}
	want = path + `:15: connections[0].proposals[0]: "aes256-sha256-modp1024" offers modp1024, a legacy group`
	if !slices.ContainsFunc(c.Warnings, func(w string) bool { return strings.HasPrefix(w, want) }) {
		t.Errorf("warnings %q, want one starting %q", c.Warnings, want)
	}
}
