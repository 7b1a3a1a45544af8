package node

import (
	"bytes"
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/xfrmif"
	"github.com/ipsecd/ipsecd/xfrmif/xfrmiftest"
)

// testNode is a Node that is never started (no sockets), with one
// interface of if_id 1 over an idle link.
func testNode(t *testing.T) *Node {
	t.Helper()
	return testNodeWith(t, Config{EphemeralKeys: true})
}

// testNodeWith is testNode made from cfg.
func testNodeWith(t *testing.T, cfg Config) *Node {
	t.Helper()
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	ifc, err := xfrmif.NewInterface(xfrmif.Config{Name: "ipsec1", IfID: 1, Queues: 1}, xfrmiftest.NewIdleLink(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.AddInterface(ifc); err != nil {
		t.Fatal(err)
	}
	return n
}

// state is an ESP-in-UDP tunnel SA on if_id 1 with a key made of b.
func state(dir sa.Dir, spi uint32, b byte) sa.Config {
	src, dst := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	if dir == sa.DirIn {
		src, dst = dst, src
	}
	return sa.Config{
		Src: src, Dst: dst, SPI: spi, Dir: dir, Mode: sa.ModeTunnel, IfID: 1,
		AEAD:  &sa.Algorithm{Name: sa.AlgGCM, Key: bytes.Repeat([]byte{b}, 20)},
		Encap: &sa.Encap{SrcPort: 4500, DstPort: 4500},
	}
}

func spis(n *Node) []uint32 {
	var out []uint32
	for _, s := range n.SAD().States() {
		out = append(out, s.SPI())
	}
	slices.Sort(out)
	return out
}

func syncFile(t *testing.T, n *Node, states []sa.Config, pols []sa.Policy) Change {
	t.Helper()
	b, err := n.BuildStates(OwnerFile, states)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := n.Sync(b, pols)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// TestSyncChangesOnlyItsOwner: a Sync of the file's SAs and policies
// leaves those of the control socket and of IKE, counts what it changed,
// keeps the SAs it names unchanged, and takes over a policy it names.
func TestSyncChangesOnlyItsOwner(t *testing.T) {
	n := testNode(t)
	sel := func(dst string) sa.Selector {
		return sa.Selector{Src: netip.MustParsePrefix("198.51.100.0/24"), Dst: netip.MustParsePrefix(dst)}
	}
	filePol := sa.Policy{Dir: sa.DirOut, IfID: 1, Selector: sel("203.0.113.0/25"), Action: sa.ActionAllow}
	ctlPol := sa.Policy{Dir: sa.DirOut, IfID: 1, Selector: sel("203.0.113.128/25"), Action: sa.ActionBlock}
	syncFile(t, n, []sa.Config{state(sa.DirOut, 0x1001, 1), state(sa.DirIn, 0x2001, 2)}, []sa.Policy{filePol})
	kept := n.SAD().States()
	if err := n.AddState(OwnerControl, state(sa.DirOut, 0x3001, 3)); err != nil {
		t.Fatal(err)
	}
	if err := n.AddPolicy(OwnerControl, ctlPol); err != nil {
		t.Fatal(err)
	}
	if err := n.InstallChild(OwnerIKE, state(sa.DirIn, 0x4001, 4), state(sa.DirOut, 0x4002, 5)); err != nil {
		t.Fatal(err)
	}

	ch := syncFile(t, n, []sa.Config{state(sa.DirIn, 0x2001, 2), state(sa.DirOut, 0x1002, 6)}, nil)
	if want := (Change{StatesAdded: 1, StatesRemoved: 1, StatesKept: 1, PoliciesRemoved: 1}); ch != want {
		t.Errorf("change %+v, want %+v", ch, want)
	}
	if got, want := spis(n), []uint32{0x1002, 0x2001, 0x3001, 0x4001, 0x4002}; !slices.Equal(got, want) {
		t.Errorf("SAs %x, want %x", got, want)
	}
	if !slices.Contains(n.SAD().States(), kept[0]) {
		t.Errorf("the unchanged inbound SA was not kept as it ran")
	}
	if got := n.SAD().Policies(); !slices.Equal(got, []sa.Policy{ctlPol}) {
		t.Errorf("policies %v, want only the control socket's", got)
	}

	// The file names the control socket's policy: it passes to the file.
	ch = syncFile(t, n, []sa.Config{state(sa.DirIn, 0x2001, 2), state(sa.DirOut, 0x1002, 6)}, []sa.Policy{ctlPol})
	if ch.PoliciesTaken != 1 || ch.PoliciesAdded != 0 {
		t.Errorf("change %+v, want the control policy taken", ch)
	}
	if o, _ := n.PolicyOwner(ctlPol); o != OwnerFile {
		t.Errorf("policy owner %q, want the file", o)
	}

	// Removing IKE's SAs leaves the others.
	if st, _, err := n.RemoveOwner(OwnerIKE); err != nil || st != 2 {
		t.Errorf("RemoveOwner(ike): %d SAs, %v; want 2", st, err)
	}
	if got, want := spis(n), []uint32{0x1002, 0x2001, 0x3001}; !slices.Equal(got, want) {
		t.Errorf("SAs after RemoveOwner %x, want %x", got, want)
	}
}

// TestInstallChild: a pair goes in together or not at all, a
// replacement removes the old pair in the same change (the new outbound
// SA seals from then on), keys are never reused, and another owner's SA
// cannot be replaced.
func TestInstallChild(t *testing.T) {
	n := testNode(t)
	in, err := n.AllocSPI()
	if err != nil {
		t.Fatal(err)
	}
	if in < 256 {
		t.Errorf("AllocSPI gave %d, a reserved SPI", in)
	}
	if err := n.InstallChild(OwnerIKE, state(sa.DirIn, in, 1), state(sa.DirOut, 0x5001, 2)); err != nil {
		t.Fatal(err)
	}
	old := []StateID{{sa.DirIn, in, netip.MustParseAddr("192.0.2.1")}, {sa.DirOut, 0x5001, netip.MustParseAddr("192.0.2.2")}}

	// The outbound SA's key reused: neither SA goes in.
	before := spis(n)
	if err := n.InstallChild(OwnerIKE, state(sa.DirIn, 0x6001, 3), state(sa.DirOut, 0x6002, 2), old...); !errors.Is(err, ErrKeyUsed) {
		t.Errorf("reused key: %v, want ErrKeyUsed", err)
	}
	// One key for both directions.
	if err := n.InstallChild(OwnerIKE, state(sa.DirIn, 0x6001, 7), state(sa.DirOut, 0x6002, 7)); !errors.Is(err, ErrInvalid) {
		t.Errorf("one key in both directions: %v, want ErrInvalid", err)
	}
	if got := spis(n); !slices.Equal(got, before) {
		t.Errorf("SAs after refused installs %x, want %x", got, before)
	}
	// Another owner's SA.
	if err := n.AddState(OwnerControl, state(sa.DirOut, 0x7001, 8)); err != nil {
		t.Fatal(err)
	}
	if err := n.InstallChild(OwnerIKE, state(sa.DirIn, 0x6001, 3), state(sa.DirOut, 0x6002, 4),
		StateID{sa.DirOut, 0x7001, netip.MustParseAddr("192.0.2.2")}); !errors.Is(err, ErrOwned) {
		t.Errorf("replacing the control socket's SA: %v, want ErrOwned", err)
	}

	// Make-before-break: the new pair in, the old out, in one change.
	if err := n.InstallChild(OwnerIKE, state(sa.DirIn, 0x6001, 3), state(sa.DirOut, 0x6002, 4), old...); err != nil {
		t.Fatal(err)
	}
	if got, want := spis(n), []uint32{0x6001, 0x6002, 0x7001}; !slices.Equal(got, want) {
		t.Errorf("SAs after the rekey %x, want %x", got, want)
	}
	pkt := []byte{0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 198, 51, 100, 1, 203, 0, 113, 1}
	if s, _ := n.SAD().LookupOut(1, pkt); s == nil || s.SPI() == 0x5001 {
		t.Errorf("after the rekey %v seals, want the new SA", s)
	}

	// IKE's way: the new pair beside the old, then the old pair removed
	// (EventChildDown), all or nothing, and only IKE's own.
	if err := n.InstallChild(OwnerIKE, state(sa.DirIn, 0x8001, 9), state(sa.DirOut, 0x8002, 10)); err != nil {
		t.Fatal(err)
	}
	pair := []StateID{{sa.DirIn, 0x6001, netip.Addr{}}, {sa.DirOut, 0x6002, netip.MustParseAddr("192.0.2.2")}}
	if err := n.RemoveStates(OwnerIKE, append(pair, StateID{sa.DirOut, 0x7001, netip.Addr{}})...); !errors.Is(err, ErrOwned) {
		t.Errorf("removing the control socket's SA as IKE: %v, want ErrOwned", err)
	}
	if err := n.RemoveStates(OwnerIKE, pair...); err != nil {
		t.Fatal(err)
	}
	if got, want := spis(n), []uint32{0x7001, 0x8001, 0x8002}; !slices.Equal(got, want) {
		t.Errorf("SAs after the old pair left %x, want %x", got, want)
	}
}

// TestAllocSPIUnique: AllocSPI never hands out an SPI twice, nor one an
// inbound SA has.
func TestAllocSPIUnique(t *testing.T) {
	n := testNode(t)
	if err := n.AddState(OwnerControl, state(sa.DirIn, 0x2001, 1)); err != nil {
		t.Fatal(err)
	}
	seen := map[uint32]bool{0x2001: true}
	for range 1000 {
		spi, err := n.AllocSPI()
		if err != nil {
			t.Fatal(err)
		}
		if seen[spi] || spi < 256 {
			t.Fatalf("AllocSPI gave %#x twice or reserved", spi)
		}
		seen[spi] = true
	}
}

// TestSetPeer: IKE moves its outbound SA to the peer's new NAT mapping;
// the SA stays the same one (same SPI, identity and sequence numbers); an
// SA of another owner, an unknown one and an inbound one are refused.
func TestSetPeer(t *testing.T) {
	n := testNode(t)
	if err := n.InstallChild(OwnerIKE, state(sa.DirIn, 0x7001, 1), state(sa.DirOut, 0x7002, 2)); err != nil {
		t.Fatal(err)
	}
	if err := n.AddState(OwnerControl, state(sa.DirOut, 0x7003, 3)); err != nil {
		t.Fatal(err)
	}
	dst := netip.MustParseAddr("192.0.2.2")
	out := StateID{Dir: sa.DirOut, SPI: 0x7002, Dst: dst}
	before := n.SAD().States()
	moved := netip.MustParseAddrPort("198.51.100.7:20001")
	if err := n.SetPeer(OwnerIKE, out, moved); err != nil {
		t.Fatal(err)
	}
	for _, s := range n.SAD().States() {
		if s.SPI() == 0x7002 {
			if s.Peer() != moved || s.Dst() != dst || !slices.Contains(before, s) {
				t.Errorf("after SetPeer: peer %v, dst %v, same SA %v; want %v, %v, true", s.Peer(), s.Dst(), slices.Contains(before, s), moved, dst)
			}
		}
	}
	for name, c := range map[string]struct {
		id   StateID
		want error
	}{
		"another owner's": {StateID{Dir: sa.DirOut, SPI: 0x7003, Dst: dst}, ErrOwned},
		"an unknown":      {StateID{Dir: sa.DirOut, SPI: 0x7999, Dst: dst}, sa.ErrNotFound},
		"an inbound":      {StateID{Dir: sa.DirIn, SPI: 0x7001, Dst: netip.MustParseAddr("192.0.2.1")}, sa.ErrInvalidConfig},
	} {
		if err := n.SetPeer(OwnerIKE, c.id, moved); !errors.Is(err, c.want) {
			t.Errorf("SetPeer of %s SA: %v, want %v", name, err, c.want)
		}
	}
}
