package proposal

import (
	"testing"

	"github.com/ipsecd/ipsecd/ike/dh"
	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/sa"
)

// TestGroupsAreDH: the key exchange groups a proposal can name are
// exactly those package dh implements, by dh's numbers: a group parsed
// or chosen here is one dh.New runs, and none dh runs lacks a name.
func TestGroupsAreDH(t *testing.T) {
	for g := 0; g < 1<<16; g++ {
		a, named := ByTransform(message.Transform{Type: message.TransDH, ID: uint16(g)})
		if named != dh.Supported(uint16(g)) {
			t.Errorf("group %d: named %v (%q), dh implements it: %v", g, named, a.Name, dh.Supported(uint16(g)))
		}
	}
	if !MODP1024.IsLegacy() || MODP2048.IsLegacy() {
		t.Error("modp1024 alone is legacy")
	}
}

// TestESPIsSA walks proposal's algorithms and sa's table both ways: every
// ENCR or INTEG algorithm that an ESP proposal may name is one an SA runs
// (sa.LookupIKEv2 by its transform), with the key bytes KEYMAT gives it
// and the ICV it stands for (none for a cipher without one); and every IKEv2 transform of sa's table is
// named here, parses in an ESP proposal, and leads back to the same sa
// algorithm. What proposal parses for ESP is exactly what sa runs.
func TestESPIsSA(t *testing.T) {
	named := 0
	for _, a := range algs {
		if a.Type != message.TransENCR && a.Type != message.TransINTEG {
			continue
		}
		info, tr, runs := a.ESP()
		_, perr := Parse(message.ProtoESP, espProposal(a))
		if (perr == nil) != runs {
			t.Errorf("%s: ESP proposal parses: %v (%v), sa runs it: %v", a.Name, perr == nil, perr, runs)
		}
		if !runs {
			continue
		}
		named++
		if tr.ID != a.ID || tr.KeyLen != a.KeyLen {
			t.Errorf("%s: sa's transform %d/%d, proposal's %d/%d", a.Name, tr.ID, tr.KeyLen, a.ID, a.KeyLen)
		}
		if tr.KeyBytes != a.KeySize() {
			t.Errorf("%s (sa %s): sa takes %d key bytes, KEYMAT gives %d", a.Name, info.Name, tr.KeyBytes, a.KeySize())
		}
		if icv := a.Type == message.TransINTEG || a.IsAEAD(); icv && tr.Bits != 8*a.ICVSize() || !icv && tr.Bits != 0 {
			t.Errorf("%s (sa %s): sa's ICV %d bits, IKE's %d", a.Name, info.Name, tr.Bits, 8*a.ICVSize())
		}
	}
	inSA := 0
	for _, info := range sa.Algorithms() {
		for _, tr := range info.IKEv2 {
			inSA++
			typ := message.TransENCR
			if info.Kind == sa.KindAuth {
				typ = message.TransINTEG
			}
			a, ok := ByTransform(message.Transform{Type: typ, ID: tr.ID, KeyLen: tr.KeyLen})
			if !ok {
				t.Errorf("sa %s: transform %d/%d has no name in proposal", info.Name, tr.ID, tr.KeyLen)
				continue
			}
			if back, _, ok := a.ESP(); !ok || back.Name != info.Name {
				t.Errorf("sa %s: transform %d/%d named %s, which leads to sa %q", info.Name, tr.ID, tr.KeyLen, a.Name, back.Name)
			}
		}
	}
	if named != inSA || named == 0 {
		t.Errorf("%d ESP algorithms named in proposal, %d IKEv2 transforms in sa's table", named, inSA)
	}
}

// espProposal is the smallest ESP proposal that names a.
func espProposal(a Alg) string {
	switch {
	case a.Type == message.TransINTEG:
		return "aes128-" + a.Name
	case a.IsAEAD():
		return a.Name
	}
	return a.Name + "-sha256"
}
