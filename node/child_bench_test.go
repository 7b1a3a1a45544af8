package node

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"

	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/xfrmif"
	"github.com/ipsecd/ipsecd/xfrmif/xfrmiftest"
)

// BenchmarkInstallChild installs one IKE child's pair into a node that
// holds n SAs (n/2 road warriors' pairs on one interface, each outbound
// SA for its client's own /32, as remote_ts = dynamic gives), with an
// events listener (the daemon always has one), and removes it again:
// what each road warrior's connect and disconnect costs the node at that
// size. The cost should not grow with n.
func BenchmarkInstallChild(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("sas=%d", n), func(b *testing.B) { benchInstallChild(b, n) })
	}
}

// roadWarrior returns client i's pair of configs: its own keys, SPIs
// and /32 virtual address (10.0.0.0/8 from 10.0.0.1 on).
func roadWarrior(i uint32) (in, out sa.Config) {
	keyed := func(c sa.Config, k uint32) sa.Config {
		binary.BigEndian.PutUint32(c.AEAD.Key, k) // every SA its own key
		return c
	}
	var a [4]byte
	binary.BigEndian.PutUint32(a[:], 10<<24+i+1)
	vip := netip.PrefixFrom(netip.AddrFrom4(a), 32)
	gw := netip.MustParsePrefix("10.255.0.0/16")
	in = keyed(state(sa.DirIn, 0x10000+2*i, 1), 0x10000+2*i)
	in.Selector = sa.Selector{Src: vip, Dst: gw}
	out = keyed(state(sa.DirOut, 0x10001+2*i, 1), 0x10001+2*i)
	out.Selector = sa.Selector{Src: gw, Dst: vip}
	return in, out
}

func benchInstallChild(b *testing.B, n int) {
	nd, err := New(Config{EphemeralKeys: true, Events: func(Event) {}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nd.Close() })
	ifc, err := xfrmif.NewInterface(xfrmif.Config{Name: "ipsec1", IfID: 1, Queues: 1}, xfrmiftest.NewIdleLink(1))
	if err != nil {
		b.Fatal(err)
	}
	if err := nd.AddInterface(ifc); err != nil {
		b.Fatal(err)
	}
	// The n SAs in one change, not n/2 installs: the setup would cost
	// what is measured, n/2 times.
	var configs []sa.Config
	for i := range uint32(n / 2) {
		in, out := roadWarrior(i)
		configs = append(configs, in, out)
	}
	build, err := nd.BuildStates(OwnerIKE, configs)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := nd.Sync(build, nil); err != nil {
		b.Fatal(err)
	}
	if got := len(nd.SAD().StatesUnordered()); got != n {
		b.Fatalf("%d SAs, want %d", got, n)
	}
	next := uint32(n / 2)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		in, out := roadWarrior(next) // InstallChild clears the keys
		ids := []StateID{{in.Dir, in.SPI, in.Dst}, {out.Dir, out.SPI, out.Dst}}
		if err := nd.InstallChild(OwnerIKE, in, out); err != nil {
			b.Fatal(err)
		}
		if err := nd.RemoveStates(OwnerIKE, ids...); err != nil {
			b.Fatal(err)
		}
	}
}
