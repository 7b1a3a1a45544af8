package proposal

import (
	"slices"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/ike/message"
)

// TestPresets: every preset parses for IKE and ESP, names its source, and
// has a legacy algorithm only with a reason; Expand gives a preset's
// proposals for its name and one parsed proposal otherwise.
func TestPresets(t *testing.T) {
	if len(Presets()) != 3 {
		t.Fatalf("got %d presets, want aws, gcp and azure", len(Presets()))
	}
	for _, pr := range Presets() {
		t.Run(pr.Name, func(t *testing.T) {
			if !strings.HasPrefix(pr.Source, "https://") {
				t.Errorf("source %q is not a vendor page", pr.Source)
			}
			legacy := false
			for _, proto := range []message.ProtocolID{message.ProtoIKE, message.ProtoESP} {
				ps, err := Expand(proto, pr.Name)
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
