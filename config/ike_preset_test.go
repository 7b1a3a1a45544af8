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
// error, the windows preset warns that it leaves Windows' legacy default
// out (see TestIKEPresetWindowsLegacy), the others load without one.
func TestIKEPresets(t *testing.T) {
	for _, name := range []string{"aws", "gcp", "azure", "windows", "apple", "android"} {
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
			if want := name == "azure" || name == "windows"; warned != want {
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

// TestIKEPresetWindowsLegacy: proposals: [windows] offers Windows'
// default group 2 (modp1024) only with allow_legacy: true, warning that it
// does; without, it warns that clients left at Windows' defaults will not
// connect, naming the way out.
func TestIKEPresetWindowsLegacy(t *testing.T) {
	text := ikeEdit(t, "proposals: [aes256-sha256-x25519, aes128gcm16-prfsha256-ecp256]", "proposals: [windows]")
	for _, allow := range []bool{false, true} {
		text := text
		if allow {
			text = strings.Replace(text, "    proposals:", "    allow_legacy: true\n    proposals:", 1)
		}
		path := writeConfig(t, text)
		c, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		legacy := 0
		for _, p := range c.Connections[0].Proposals {
			if len(p.Legacy()) > 0 {
				legacy++
			}
		}
		want := "connections[0].proposals[0]: preset windows leaves out its legacy proposals (aes256gcm16-aes128gcm16-prfsha384-prfsha256-modp1024, aes256-aes128-sha384-sha256-modp1024): Windows' built-in IKEv2 client offers only DH group 2 (modp1024) unless"
		if allow {
			want = "connections[0].proposals[0]: preset windows offers modp1024, a legacy group"
		}
		if got := len(c.Connections[0].Proposals); legacy != map[bool]int{false: 0, true: 2}[allow] || got != 2+legacy {
			t.Errorf("allow_legacy %t: %d proposals, %d of them legacy", allow, got, legacy)
		}
		if !slices.ContainsFunc(c.Warnings, func(w string) bool { return strings.Contains(w, want) }) {
			t.Errorf("allow_legacy %t: warnings %q, want one with %q", allow, c.Warnings, want)
		}
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
