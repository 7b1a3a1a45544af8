package main

import (
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/daemon"
	ipnode "github.com/ipsecd/ipsecd/node"
	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/xfrmif"
	"github.com/ipsecd/ipsecd/xfrmif/xfrmiftest"
)

// testNode is a node without TUN devices or underlay, and the daemon's
// backend over it (daemon.New), for the command line to talk to through
// a real control socket.
type testNode struct {
	core    *ipnode.Node
	sad     *sa.SAD
	reg     *xfrmif.Registry
	events  *control.Monitor // set by the test that streams them
	backend control.Backend
}

func newTestNode(t testing.TB, log *logrus.Logger, c ipnode.Config) *testNode {
	t.Helper()
	c.Log = log
	core, err := ipnode.New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { core.Close() })
	return &testNode{core: core, sad: core.SAD(), reg: core.Registry(), backend: daemon.New(core, log).Backend()}
}

func addInterface(t testing.TB, n *testNode, name string, ifID uint32, queues int) *xfrmif.Interface {
	t.Helper()
	ifc, err := xfrmif.NewInterface(xfrmif.Config{Name: name, IfID: ifID, Queues: queues}, xfrmiftest.NewIdleLink(queues))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.reg.Add(ifc); err != nil {
		t.Fatal(err)
	}
	return ifc
}

// innerPacket is an IPv4 packet 198.51.100.10 -> 203.0.113.10 of n bytes
// in a buffer with room for ESP.
func innerPacket(n int) sa.Packet {
	buf := make([]byte, sa.Headroom+n+sa.Tailroom)
	p := buf[sa.Headroom : sa.Headroom+n]
	p[0] = 0x45
	p[2], p[3] = byte(n>>8), byte(n)
	p[8], p[9] = 64, 17
	copy(p[12:], []byte{198, 51, 100, 10})
	copy(p[16:], []byte{203, 0, 113, 10})
	return sa.Packet{Buf: buf, Off: sa.Headroom, Len: n}
}
