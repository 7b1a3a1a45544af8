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
)

// TestWaitWaitsForOpeners: Engine.Wait returns only once every goroutine
// of the engine has returned, the receivers' opener helpers included, so
// that a node that stops and then wipes its SAs' keys never races an
// opener still holding a batch.
func TestWaitWaitsForOpeners(t *testing.T) {
	conn, err := underlay.Open(underlay.Config{UDP: netip.MustParseAddrPort("127.0.0.1:0")}, nil)
	if err != nil {
		t.Skipf("no underlay here: %v", err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	e := New(sa.NewSAD(nil), &xfrmif.Registry{}, FromConn(conn), logrus.NewEntry(log))
	e.SetInboundWorkers(8)
	ctx, cancel := context.WithCancel(context.Background())
	e.Start(ctx)
	for deadline := time.Now().Add(5 * time.Second); !hasGoroutine("routineOpen"); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no opener helper started")
		}
	}
	cancel()
	conn.Close()
	e.Wait()
	if hasGoroutine("routineOpen") {
		t.Error("an opener helper still runs after Engine.Wait returned")
	}
}

// hasGoroutine reports whether a goroutine's stack holds fn.
func hasGoroutine(fn string) bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), fn)
}
