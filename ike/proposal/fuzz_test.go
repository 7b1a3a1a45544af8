package proposal

import (
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/ike/message"
)

// FuzzParse: whatever Parse accepts as an ESP proposal names only
// algorithms an SA runs (Alg.ESP), and its canonical string parses to
// itself; and whatever a peer's ESP proposal (the same string's
// transforms, unchecked) makes Select choose against a proposal of ours
// that names everything, runs too.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"aes128gcm16", "aes256-sha256-x25519-esn", "aes256-sha384", "chacha20poly1305-sha512",
		"aes128-aes256-sha512-sha384-sha256-ecp384", "aes256gcm16-prfsha256-x25519", "aes192-aes128-sha1", "aes256-sha1-sha256-modp2048"} {
		f.Add(s)
	}
	var all []Alg
	for _, a := range algs {
		if a.Type != message.TransPRF {
			all = append(all, a)
		}
	}
	ours := []Proposal{{Protocol: message.ProtoESP, Algs: all}}
	f.Fuzz(func(t *testing.T, s string) {
		if p, err := Parse(message.ProtoESP, s); err == nil {
			for _, a := range p.Algs {
				if _, _, ok := a.ESP(); (a.Type == message.TransENCR || a.Type == message.TransINTEG) && !ok {
					t.Fatalf("Parse(%q) accepted %s, which no SA runs", s, a.Name)
				}
			}
			if q, err := Parse(message.ProtoESP, p.String()); err != nil || q.String() != p.String() {
				t.Fatalf("re-parse of %q: %q, %v", p, q, err)
			}
		}
		// The same names, unchecked, as a peer could send them.
		var theirs message.Proposal
		theirs.Num, theirs.Protocol = 1, message.ProtoESP
		for _, name := range strings.Split(s, "-") {
			if a, ok := Lookup(name); ok {
				theirs.Transforms = append(theirs.Transforms, a.Transform())
			}
		}
		suite, err := Select(ours, []message.Proposal{theirs}, true)
		if err != nil {
			return
		}
		for _, a := range []Alg{suite.Encr, suite.Integ} {
			if _, _, ok := a.ESP(); a.Name != "" && !ok {
				t.Fatalf("Select chose %s from %q, which no SA runs", a.Name, s)
			}
		}
	})
}
