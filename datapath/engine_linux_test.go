package datapath

import (
	"context"
	"io"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/underlay"
	"github.com/ipsecd/ipsecd/xfrmif"
	"github.com/ipsecd/ipsecd/xfrmif/xfrmiftest"
)

// TestWaitWaitsForOpeners: Engine.Wait returns only once every goroutine
// of the engine has returned, the workers of both loops
// (routineTransmit, routineReceive) and the receivers' opener helpers
// (routineOpen), so that a node that stops and then wipes its SAs' keys
// never races a worker still holding a batch.
func TestWaitWaitsForOpeners(t *testing.T) {
	conn, err := underlay.Open(underlay.Config{UDP: netip.MustParseAddrPort("127.0.0.1:0")}, nil)
	if err != nil {
		t.Skipf("no underlay here: %v", err)
	}
	ifc, err := xfrmif.NewInterface(xfrmif.Config{Name: "ipsec1", IfID: 1, Queues: 2}, xfrmiftest.NewIdleLink(2))
	if err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	e := New(sa.NewSAD(nil), &xfrmif.Registry{}, FromConn(conn), logrus.NewEntry(log))
	e.SetInboundWorkers(8)
	ctx, cancel := context.WithCancel(context.Background())
	e.Start(ctx)
	e.StartInterface(ctx, ifc)
	workers := []string{"routineOpen", "routineReceive", "routineTransmit"}
	for _, fn := range workers {
		for deadline := time.Now().Add(5 * time.Second); !hasGoroutine(fn); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s started", fn)
			}
		}
	}
	cancel()
	conn.Close()
	ifc.Close() // an idle link's reads have no deadline: Close ends them
	e.Wait()
	for _, fn := range workers {
		if hasGoroutine(fn) {
			t.Errorf("a %s still runs after Engine.Wait returned", fn)
		}
	}
}

// hasGoroutine reports whether a goroutine's stack holds fn.
func hasGoroutine(fn string) bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), fn)
}
