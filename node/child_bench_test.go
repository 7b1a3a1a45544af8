package node

import (
	"encoding/binary"
	"testing"

	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/xfrmif"
	"github.com/ipsecd/ipsecd/xfrmif/xfrmiftest"
)

// BenchmarkInstallChild1000 installs one IKE child's pair into a node that
// holds 1,000 others, with an events listener (the daemon always has
// one), and removes it again: what each road warrior's connect and
// disconnect costs the node at that size.
func BenchmarkInstallChild1000(b *testing.B) {
	n, err := New(Config{EphemeralKeys: true, Events: func(Event) {}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.Close() })
	ifc, err := xfrmif.NewInterface(xfrmif.Config{Name: "ipsec1", IfID: 1, Queues: 1}, xfrmiftest.NewIdleLink(1))
	if err != nil {
		b.Fatal(err)
	}
	if err := n.AddInterface(ifc); err != nil {
		b.Fatal(err)
	}
	keyed := func(c sa.Config, k uint32) sa.Config {
		binary.BigEndian.PutUint32(c.AEAD.Key, k) // every SA its own key
		return c
	}
	for i := range uint32(1000) {
		if err := n.InstallChild(OwnerIKE, keyed(state(sa.DirIn, 0x10000+2*i, 1), 0x10000+2*i), keyed(state(sa.DirOut, 0x10001+2*i, 1), 0x10001+2*i)); err != nil {
			b.Fatal(err)
		}
	}
	in, out := state(sa.DirIn, 0x2001, 3), state(sa.DirOut, 0x2002, 4)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := n.InstallChild(OwnerIKE, in, out); err != nil {
			b.Fatal(err)
		}
		if err := n.RemoveStates(OwnerIKE, StateID{sa.DirIn, 0x2001, in.Dst}, StateID{sa.DirOut, 0x2002, out.Dst}); err != nil {
			b.Fatal(err)
		}
		in, out = state(sa.DirIn, 0x2001, 3), state(sa.DirOut, 0x2002, 4) // InstallChild cleared the keys
	}
}
