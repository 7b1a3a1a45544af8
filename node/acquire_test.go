package node

import (
	"net/netip"
	"testing"

	"github.com/ipsecd/ipsecd/sa"
)

// TestConfigAcquire: Config.Acquire receives the acquire of an out policy
// the node holds with no SA (the data path's LookupOut raises it), and
// the packet is counted as XfrmOutNoStates.
func TestConfigAcquire(t *testing.T) {
	var got []sa.Acquire
	n := testNodeWith(t, Config{EphemeralKeys: true, Acquire: func(a sa.Acquire) { got = append(got, a) }})
	trap := sa.Policy{Dir: sa.DirOut, IfID: 1, Action: sa.ActionAllow, Selector: sa.Selector{
		Src: netip.MustParsePrefix("10.10.0.0/24"), Dst: netip.MustParsePrefix("10.20.0.0/24")}}
	if err := n.AddPolicy(Owner("ike"), trap); err != nil {
		t.Fatal(err)
	}
	pkt := make([]byte, 20)
	pkt[0] = 0x45
	copy(pkt[12:], []byte{10, 10, 0, 1})
	copy(pkt[16:], []byte{10, 20, 0, 9})
	for range 3 {
		if s, c := n.SAD().LookupOut(1, pkt); s != nil || c != sa.XfrmOutNoStates {
			t.Fatalf("LookupOut = %v, %v", s, c)
		}
	}
	if len(got) != 1 || got[0].Policy != trap || got[0].Dst != netip.MustParseAddr("10.20.0.9") {
		t.Fatalf("acquires %+v, want one for %+v", got, trap)
	}
	if c := n.Counters().Get(sa.XfrmOutNoStates); c != 3 {
		t.Errorf("XfrmOutNoStates = %d, want 3", c)
	}
}
