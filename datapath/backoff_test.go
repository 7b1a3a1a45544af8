package datapath_test

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/datapath"
	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/underlay"
	"github.com/ipsecd/ipsecd/xfrmif"
	"github.com/ipsecd/ipsecd/xfrmif/xfrmiftest"
)

var errBroken = errors.New("broken")

// brokenQueue is an interface queue whose every read fails at once.
type brokenQueue struct{ reads atomic.Int64 }

func (q *brokenQueue) Read([][]byte, []int, int) (int, error)  { q.reads.Add(1); return 0, errBroken }
func (q *brokenQueue) Write(bufs [][]byte, _ int) (int, error) { return len(bufs), nil }
func (q *brokenQueue) BatchSize() int                          { return 1 }

// brokenUnderlay has one receiver whose every read fails at once.
type brokenUnderlay struct{ reads atomic.Int64 }

func (u *brokenUnderlay) Receivers() []datapath.Receiver      { return []datapath.Receiver{u} }
func (u *brokenUnderlay) WriteBatch([]underlay.Message) error { return nil }
func (u *brokenUnderlay) ReadBatch([]underlay.Message) (int, error) {
	u.reads.Add(1)
	return 0, errBroken
}
func (u *brokenUnderlay) BatchSize() int                  { return 1 }
func (u *brokenUnderlay) SetReadDeadline(time.Time) error { return nil }
func (u *brokenUnderlay) String() string                  { return "broken" }

// TestLastingReadErrorBacksOff: a source whose every read fails (a broken
// socket, a queue in a bad state) costs both loops, transmit and receive,
// the same few reads, not a spinning core: after a run of failures they
// pause, longer and longer. In 300 ms a spinning loop reads hundreds of
// times or more; the shared backoff allows 16 free failures and then
// about 9 pauses (1, 2, ..., 64, 64 ms). A transmit error is counted on
// the interface for each failed read.
func TestLastingReadErrorBacksOff(t *testing.T) {
	const window, maxReads = 300 * time.Millisecond, 40
	log := logrus.New()
	log.SetOutput(io.Discard)
	q := &brokenQueue{}
	ifc, err := xfrmif.NewInterface(xfrmif.Config{Name: "ipsec1", IfID: 1}, xfrmiftest.NewLink(q))
	if err != nil {
		t.Fatal(err)
	}
	reg := &xfrmif.Registry{}
	if err := reg.Add(ifc); err != nil {
		t.Fatal(err)
	}
	u := &brokenUnderlay{}
	e := datapath.New(sa.NewSAD(nil), reg, u, logrus.NewEntry(log))
	ctx, cancel := context.WithTimeout(context.Background(), window)
	defer cancel()
	e.Start(ctx)
	e.StartInterface(ctx, ifc)
	<-ctx.Done()
	e.Wait()
	for _, side := range []struct {
		name  string
		reads int64
	}{
		{"transmit (interface queue)", q.reads.Load()},
		{"receive (underlay)", u.reads.Load()},
	} {
		if side.reads > maxReads {
			t.Errorf("%s: %d reads of a broken source in %v, want at most %d", side.name, side.reads, window, maxReads)
		}
		if side.reads < 17 {
			t.Errorf("%s: %d reads in %v, want more than the 16 free failures", side.name, side.reads, window)
		}
	}
	if st := ifc.Stats(); st.TxErrors != uint64(q.reads.Load()) {
		t.Errorf("interface TxErrors = %d, want one per failed read (%d)", st.TxErrors, q.reads.Load())
	}
}
