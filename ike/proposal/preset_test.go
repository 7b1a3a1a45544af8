package proposal

import (
	"slices"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/ike/message"
)

// TestPresets: every preset parses for IKE and ESP, names its source, and
// has a legacy algorithm (with allow_legacy) only with a reason; Expand
// gives a preset's proposals for its name and one parsed proposal
// otherwise.
func TestPresets(t *testing.T) {
	var names []string
	for _, pr := range Presets() {
		names = append(names, pr.Name)
	}
	if want := []string{"aws", "gcp", "azure", "windows", "apple", "android"}; !slices.Equal(names, want) {
		t.Fatalf("got presets %v, want %v", names, want)
	}
	for _, pr := range Presets() {
		t.Run(pr.Name, func(t *testing.T) {
			if !strings.HasPrefix(pr.Source, "https://") {
				t.Errorf("source %q is not a vendor page", pr.Source)
			}
			legacy := false
			for _, proto := range []message.ProtocolID{message.ProtoIKE, message.ProtoESP} {
				ps, err := ExpandLegacy(proto, pr.Name, true)
				if err != nil || len(ps) == 0 {
					t.Fatalf("Expand(%v, %q) = %v, %v", proto, pr.Name, ps, err)
				}
				for _, p := range ps {
					legacy = legacy || len(p.Legacy()) > 0
				}
			}
			if legacy != (pr.Why != "") {
				t.Errorf("legacy algorithms %t, but Why is %q", legacy, pr.Why)
			}
		})
	}
	ps, err := Expand(message.ProtoESP, "aes128gcm16")
	if err != nil || len(ps) != 1 || ps[0].String() != "aes128gcm16-noesn" {
		t.Fatalf("Expand of a proposal string: %v, %v", ps, err)
	}
	if _, err := Expand(message.ProtoIKE, "amazon"); err == nil {
		t.Fatal("Expand of an unknown name succeeded")
	}
}

// TestPresetLegacyOptIn: the windows preset offers Windows' default
// group 2 (modp1024) only to a connection that allows legacy algorithms,
// after its modern proposals; the azure preset, whose gateway offers
// nothing else, always.
func TestPresetLegacyOptIn(t *testing.T) {
	for _, tc := range []struct {
		preset            string
		allow             bool
		proposals, legacy int
	}{
		{"windows", false, 2, 0},
		{"windows", true, 4, 2},
		{"azure", false, 1, 1},
		{"apple", true, 2, 0},
	} {
		ps, err := ExpandLegacy(message.ProtoIKE, tc.preset, tc.allow)
		if err != nil {
			t.Fatal(err)
		}
		legacy := 0
		for i, p := range ps {
			if len(p.Legacy()) > 0 {
				legacy++
			} else if legacy > 0 {
				t.Errorf("%s: proposal %d (%s) follows a legacy one", tc.preset, i, p)
			}
		}
		if len(ps) != tc.proposals || legacy != tc.legacy {
			t.Errorf("%s allow_legacy=%t: %d proposals, %d legacy; want %d, %d", tc.preset, tc.allow, len(ps), legacy, tc.proposals, tc.legacy)
		}
	}
	ps, _ := Expand(message.ProtoESP, "windows")
	for _, p := range ps {
		if len(p.Legacy()) > 0 {
			t.Errorf("windows ESP proposal %s is legacy", p)
		}
	}
}

// TestLegacy: modp1024 is the one legacy algorithm, and a proposal names
// its legacy algorithms.
func TestLegacy(t *testing.T) {
	for _, a := range algs {
		if a.IsLegacy() != (a.Name == "modp1024") {
			t.Errorf("%s: IsLegacy %t", a.Name, a.IsLegacy())
		}
	}
	p, _ := Parse(message.ProtoIKE, "aes256-sha256-modp2048-modp1024")
	if got := p.Legacy(); !slices.Equal(got, []string{"modp1024"}) {
		t.Fatalf("Legacy() = %v, want [modp1024]", got)
	}
}
