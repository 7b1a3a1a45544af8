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
