package ike

import (
	"net/netip"
	"testing"

	"github.com/ipsecd/ipsecd/ike/message"
)

// threeChildren returns the configs of two peers whose connection has
// three children of different selectors, ESP proposals and modes; the
// initiator's IKE_AUTH proposes the child named first.
func threeChildren(t testing.TB, first string) (a, b *Config) {
	a, b = pairConfigs(t, []string{"aes128gcm16-prfsha256-x25519"}, []string{"aes128gcm16"})
	kids := []struct {
		name, esp string
		n         byte
		transport bool
	}{{"one", "aes128gcm16", 1, false}, {"two", "aes256gcm16", 2, false}, {"three", "aes128gcm16-x25519", 3, true}}
	for _, k := range kids {
		l := netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 51, k.n, 0}), 24)
		r := netip.PrefixFrom(netip.AddrFrom4([4]byte{203, 0, k.n, 0}), 24)
		esp := mustProposals(t, message.ProtoESP, k.esp)
		a.Children = append(a.Children, ChildConfig{Name: k.name, Proposals: esp, LocalTS: []netip.Prefix{l}, RemoteTS: []netip.Prefix{r}, Transport: k.transport})
		b.Children = append(b.Children, ChildConfig{Name: k.name, Proposals: esp, LocalTS: []netip.Prefix{r}, RemoteTS: []netip.Prefix{l}, Transport: k.transport})
	}
	a.Child = *a.ChildConfig(first)
	b.Child = *b.ChildConfig("one")
	return a, b
}

// TestResponderSelectsChildByTS: the responder gives a child the config
// of the connection's child whose selectors the offer meets, with that
// child's proposals and mode, whichever child the initiator proposes in
// IKE_AUTH; an offer that meets none is refused TS_UNACCEPTABLE.
func TestResponderSelectsChildByTS(t *testing.T) {
	for _, tt := range []struct {
		first, suite string
		transport    bool
	}{{"one", "aes128gcm16-noesn", false}, {"two", "aes256gcm16-noesn", false}, {"three", "aes128gcm16-noesn", true}} {
		t.Run(tt.first, func(t *testing.T) {
			ci, cr := threeChildren(t, tt.first)
			ini, res, errI, errR := run(t, ci, cr)
			if errI != nil || errR != nil {
				t.Fatal(errI, errR)
			}
			for _, s := range []*SA{ini, res} {
				cs := s.Children()
				if len(cs) != 1 || cs[0].Name != tt.first || cs[0].Suite.String() != tt.suite || cs[0].Transport != tt.transport {
					t.Fatalf("children %+v: want one named %s, %s, transport %v", cs, tt.first, tt.suite, tt.transport)
				}
			}
			if got := res.Children()[0].LocalTS[0].Start; got.As4()[2] != ini.Children()[0].RemoteTS[0].Start.As4()[2] {
				t.Errorf("responder's local selector %v, the initiator's remote %v", got, ini.Children()[0].RemoteTS[0].Start)
			}
		})
	}
	t.Run("none", func(t *testing.T) {
		ci, cr := threeChildren(t, "one")
		ci.Child.LocalTS = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
		_, res, _, errR := run(t, ci, cr)
		if len(res.Children()) != 0 || errR == nil {
			t.Fatalf("an offer meeting no child: %d children, %v", len(res.Children()), errR)
		}
	})
}

// TestAdditionalChild: under one IKE SA, either side creates the
// connection's further children with CREATE_CHILD_SA (§1.3.1), each
// with its own config (the third with PFS and transport mode); each is
// rekeyed and deleted on its own, and the others stay.
func TestAdditionalChild(t *testing.T) {
	ci, cr := threeChildren(t, "one")
	a, b := establishedSides(t, ci, cr, false)
	for _, tt := range []struct {
		from, to *SA
		name     string
	}{{a, b, "two"}, {b, a, "three"}} {
		req, err := tt.from.CreateChild(tt.name, t0)
		if err != nil {
			t.Fatal(err)
		}
		if next := exchange(t, tt.from, tt.to, req); next != nil {
			t.Fatal("a request after creating a child")
		}
		upF, _ := childEvents(t, tt.from)
		upT, _ := childEvents(t, tt.to)
		if len(upF) != 1 || len(upT) != 1 || upF[0].Name != tt.name || upT[0].Name != tt.name || upF[0].OutSPI != upT[0].InSPI || upF[0].Replaces != nil {
			t.Fatalf("creating %s: up %+v and %+v", tt.name, upF, upT)
		}
	}
	if len(a.Children()) != 3 || len(b.Children()) != 3 {
		t.Fatalf("%d and %d children, want 3 each", len(a.Children()), len(b.Children()))
	}
	byName := func(s *SA, name string) *Child {
		for _, c := range s.Children() {
			if c.Name == name {
				return c
			}
		}
		t.Fatalf("no child %s", name)
		return nil
	}
	if c := byName(a, "three"); c.Suite.DH.Name != "x25519" || !c.Transport || c.Suite.String() != "aes128gcm16-x25519-noesn" {
		t.Errorf("child three: %s, transport %v; want its own proposal with PFS, transport", c.Suite, c.Transport)
	}
	if c := byName(b, "two"); c.Suite.Encr.Name != "aes256gcm16" {
		t.Errorf("child two: %s, want aes256gcm16", c.Suite)
	}

	// Rekey three from A: it keeps its name and config; one and two
	// stay.
	old := byName(a, "three")
	req, err := a.RekeyChild(old, t0)
	if err != nil {
		t.Fatal(err)
	}
	del := exchange(t, a, b, req)
	if next := exchange(t, a, b, del); next != nil {
		t.Fatal("a request after the rekey's delete")
	}
	up, down := childEvents(t, a)
	if len(up) != 1 || len(down) != 1 || up[0].Name != "three" || down[0] != old || up[0].Suite.DH.Name != "x25519" || !up[0].Transport {
		t.Fatalf("rekey of three: up %+v, down %+v", up, down)
	}
	b.TakeEvents()

	// Delete two from B: one and three stay.
	req, err = b.DeleteChild(byName(b, "two"), t0)
	if err != nil {
		t.Fatal(err)
	}
	exchange(t, b, a, req)
	for _, s := range []*SA{a, b} {
		_, down := childEvents(t, s)
		var left []string
		for _, c := range s.Children() {
			left = append(left, c.Name)
		}
		if len(down) != 1 || down[0].Name != "two" || len(left) != 2 || left[0] != "one" || left[1] != "three" {
			t.Fatalf("after deleting two: down %+v, left %v; want two down, one and three left", down, left)
		}
	}
}

// TestMaxChildrenCountsConfigured: with three children configured, the
// bound on an IKE SA's children is raised to their number plus the
// room one child needs beside itself, whatever Config.MaxChildren says
// below it.
func TestMaxChildrenCountsConfigured(t *testing.T) {
	ci, _ := threeChildren(t, "one")
	for _, tt := range []struct{ set, want int }{{0, 6}, {2, 6}, {4, 6}, {10, 10}} {
		ci.MaxChildren = tt.set
		if got := ci.maxChildren(); got != tt.want {
			t.Errorf("MaxChildren %d with 3 children: bound %d, want %d", tt.set, got, tt.want)
		}
	}
	one, _ := pairConfigs(t, []string{"aes128gcm16-prfsha256-x25519"}, []string{"aes128gcm16"})
	if got := one.maxChildren(); got != DefaultMaxChildren {
		t.Errorf("one child: bound %d, want %d", got, DefaultMaxChildren)
	}
}

// FuzzCreateChild is an authenticated peer asking for new children of a
// connection of three with whatever CREATE_CHILD_SA it likes (any
// payloads after the SK header, sealed so that they authenticate): the
// responder must answer without panicking, and every child it makes is
// of a configured child, within that child's selectors, and no more
// than the bound.
func FuzzCreateChild(f *testing.F) {
	ci, cr := threeChildren(f, "one")
	ts := func(p string) []byte {
		return message.AppendTS(nil, prefixSelectors([]netip.Prefix{netip.MustParsePrefix(p)}))
	}
	for _, kid := range []struct{ esp, l, r string }{{"aes256gcm16", "198.51.2.0/24", "203.0.2.0/24"}, {"aes128gcm16-x25519", "198.51.3.0/25", "203.0.3.0/24"}, {"aes128gcm16", "198.51.0.0/16", "203.0.1.0/24"}} {
		sa := message.AppendSA(nil, []message.Proposal{mustProposals(f, message.ProtoESP, kid.esp)[0].Message(1, []byte{1, 2, 3, 4})})
		seed, _ := message.AppendPayloads(nil, []message.Payload{
			{Type: message.TypeSA, Body: sa},
			{Type: message.TypeNONC, Body: make([]byte, 32)},
			{Type: message.TypeKE, Body: message.AppendKE(nil, 31, make([]byte, 32))},
			{Type: message.TypeTSi, Body: ts(kid.l)},
			{Type: message.TypeTSr, Body: ts(kid.r)},
		})
		f.Add(uint8(message.TypeSA), seed)
	}
	f.Fuzz(func(t *testing.T, first uint8, chain []byte) {
		ini, res, errI, errR := run(t, ci, cr)
		if errI != nil || errR != nil {
			t.Fatal(errI, errR)
		}
		for range 3 {
			h := ini.header(message.CreateChildSA, ini.nextID, false)
			msg, err := ini.seal.Seal(h, message.PayloadType(first), chain)
			if err != nil {
				return
			}
			ini.nextID++
			res.Handle(msg, t0)
		}
		if n := len(res.Children()); n > res.cfg.maxChildren() {
			t.Fatalf("%d children, bound %d", n, res.cfg.maxChildren())
		}
		for _, c := range res.Children() {
			cc := res.cfg.ChildConfig(c.Name)
			if cc == nil || c.cfg != cc && c.cfg != &res.cfg.Child {
				t.Fatalf("child %q of no configured child", c.Name)
			}
			if !within(c.LocalTS, prefixSelectors(cc.LocalTS)) || !within(c.RemoteTS, prefixSelectors(cc.RemoteTS)) {
				t.Fatalf("child %q with selectors %v/%v outside its config's %v/%v", c.Name, c.LocalTS, c.RemoteTS, cc.LocalTS, cc.RemoteTS)
			}
		}
	})
}
