package stack

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/internal/syncbuf"
	"github.com/ipsecd/ipsecd/sa"
)

// blockedWriter blocks every Write until release is closed, as a log
// sink on a full pipe or a stalled terminal does.
type blockedWriter struct {
	release chan struct{}
	w       io.Writer
}

func (b *blockedWriter) Write(p []byte) (int, error) {
	<-b.release
	return b.w.Write(p)
}

// TestLifetimeEventsDoNotBlock: an SA's lifetime event is handed off, not
// logged on the goroutine that noticed it (a data-path worker, or the
// caller of Tick): with a log sink that blocks, Tick still returns, and
// the event is logged once the sink takes it.
func TestLifetimeEventsDoNotBlock(t *testing.T) {
	var out syncbuf.Buffer
	w := &blockedWriter{release: make(chan struct{}), w: &out}
	l := logrus.New()
	l.SetOutput(w)
	cfg := stateTestConfig(t)
	cfg.EphemeralKeys = true
	cfg.Log = logrus.NewEntry(l)
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			close(w.release)
			released = true
		}
	}
	defer func() { release(); n.Close() }()
	c := stateTestSA(0x1001)
	c.Lifetime = sa.Lifetime{SoftAdd: time.Minute, HardAdd: time.Hour}
	if err := n.AddState(c); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		n.SAD().Tick(time.Now().Add(2 * time.Minute))
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		release() // let the blocked handler go, and the test end
		<-done
		t.Fatal("Tick blocked on the log sink: the lifetime event was logged on the data path")
	}
	release()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "lifetime expired") {
		if time.Now().After(deadline) {
			t.Fatalf("the soft expiry was never logged; log:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
