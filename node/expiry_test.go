package node

import (
	"context"
	"encoding/hex"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/internal/syncbuf"
	"github.com/ipsecd/ipsecd/sa"
)

// expiryNode is a Node with only what lifetimes need: a SAD wired to the
// expiry queue and a logger writing text lines into the returned buffer.
// Its ticker does not run (the tests call its steps, or start it).
func expiryNode(t *testing.T) (*Node, *syncbuf.Buffer) {
	t.Helper()
	var out syncbuf.Buffer
	log := logrus.New()
	log.SetOutput(&out)
	log.SetLevel(logrus.DebugLevel)
	log.SetFormatter(&logrus.TextFormatter{DisableTimestamp: true})
	n := &Node{log: log, counters: &sa.Counters{}, owners: map[*sa.SA]Owner{}}
	n.sad = sa.NewSAD(n.counters)
	n.sad.SetEventHandler(n.expiry.push)
	n.ctx, n.cancel = context.WithCancel(context.Background())
	t.Cleanup(n.cancel)
	return n, &out
}

func newLifetimeSA(t *testing.T, spi uint32, key []byte, lt sa.Lifetime) *sa.SA {
	t.Helper()
	s, err := sa.New(sa.Config{
		Src: netip.MustParseAddr("192.0.2.1"), Dst: netip.MustParseAddr("192.0.2.2"),
		SPI: spi, Dir: sa.DirOut, Mode: sa.ModeTunnel, IfID: 1,
		AEAD: &sa.Algorithm{Name: sa.AlgGCM, Key: key}, Lifetime: lt,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestExpiryEvents: the events an SA raises are logged by the tick side,
// one structured line each with the SA's id fields and never its key, and
// a hard expiry removes the SA from the SAD (its keys wiped), with a line
// saying so; SAs without limits stay.
func TestExpiryEvents(t *testing.T) {
	n, out := expiryNode(t)
	key := []byte("\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\xcc\xdd\xee\xff\x10\x20\x30\x40\x50")
	dying := newLifetimeSA(t, 0x1001, key, sa.Lifetime{SoftAdd: time.Minute, HardAdd: 2 * time.Minute})
	other := newLifetimeSA(t, 0x1002, key, sa.Lifetime{})
	if err := n.sad.Replace([]*sa.SA{dying, other}, nil); err != nil {
		t.Fatal(err)
	}
	added := dying.Added()

	n.sad.Tick(added.Add(time.Minute))
	n.logExpiries()
	n.reapExpired()
	const id = "dir=out dst=192.0.2.2 if_id=1"
	want := `level=warning msg="SA lifetime expired" ` + id + ` kind=soft reason="add time" spi=0x1001 src=192.0.2.1`
	if got := strings.TrimSpace(out.String()); got != want {
		t.Errorf("soft expiry logged\n%s\nwant\n%s", got, want)
	}
	if len(n.sad.States()) != 2 {
		t.Fatalf("a soft expiry removed an SA")
	}

	n.sad.Tick(added.Add(2 * time.Minute))
	n.logExpiries()
	n.reapExpired()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	wantLines := []string{
		want,
		`level=warning msg="SA lifetime expired" ` + id + ` kind=hard reason="add time" spi=0x1001 src=192.0.2.1`,
		`level=info msg="SA removed: its hard lifetime expired" ` + id + ` spi=0x1001 src=192.0.2.1`,
	}
	if strings.Join(lines, "\n") != strings.Join(wantLines, "\n") {
		t.Errorf("log\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(wantLines, "\n"))
	}
	if st := n.sad.States(); len(st) != 1 || st[0] != other {
		t.Errorf("SAD after the hard expiry: %v, want only %v", st, other)
	}
	if !dying.Wiped() {
		t.Errorf("the removed SA's keys are not wiped")
	}
	if strings.Contains(out.String(), hex.EncodeToString(key[:8])) {
		t.Errorf("the log shows key material")
	}
}

// TestExpiryQueueNeverBlocks: with nobody reading, pushes return, the
// queue keeps its bound and counts what it lost, and one wake-up is
// pending.
func TestExpiryQueueNeverBlocks(t *testing.T) {
	var q expiryQueue
	s := newLifetimeSA(t, 0x1001, make([]byte, 20), sa.Lifetime{})
	done := make(chan struct{})
	go func() {
		for range maxQueuedExpiries + 10 {
			q.push(sa.Event{SA: s, Kind: sa.SoftExpire, Reason: sa.ReasonBytes})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("push blocked with no reader")
	}
	select {
	case <-q.wakeup():
	default:
		t.Error("no wake-up pending after pushes")
	}
	events, lost := q.take()
	if len(events) != maxQueuedExpiries || lost != 10 {
		t.Errorf("took %d events, %d lost; want %d and 10", len(events), lost, maxQueuedExpiries)
	}
	if events, lost := q.take(); len(events) != 0 || lost != 0 {
		t.Errorf("second take: %d events, %d lost; want none", len(events), lost)
	}
}

// TestTickRemovesHardExpired runs the node's tick goroutine: an SA whose
// hard add time passes is gone from the SAD within about a second of it.
func TestTickRemovesHardExpired(t *testing.T) {
	n, out := expiryNode(t)
	s := newLifetimeSA(t, 0x1001, make([]byte, 20), sa.Lifetime{HardAdd: time.Second})
	if err := n.sad.Add(s); err != nil {
		t.Fatal(err)
	}
	n.routines.Add(1)
	go n.routineTick()
	deadline := s.Added().Add(time.Second + 3*time.Second) // a tick, and slack for a loaded machine
	for len(n.sad.States()) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("SA still in the SAD %v after its hard add time; log:\n%s", time.Since(s.Added())-time.Second, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for !strings.Contains(out.String(), "SA removed") {
		if time.Now().After(deadline) {
			t.Fatalf("no removal line; log:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !s.Wiped() {
		t.Errorf("removed SA not wiped")
	}
}

// TestReapIdle: the once-a-second sweep reports a hard expiry as the SA's
// deletion with its reason, and with nothing expired allocates nothing,
// however many SAs there are (it used to copy the SAD to compare with).
func TestReapIdle(t *testing.T) {
	n, _ := expiryNode(t)
	var events []Event
	n.events = func(ev Event) { events = append(events, ev) }
	key := []byte("\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\xcc\xdd\xee\xff\x10\x20\x30\x40\x50")
	var sas []*sa.SA
	for i := range 1000 {
		sas = append(sas, newLifetimeSA(t, uint32(0x2000+i), key, sa.Lifetime{}))
	}
	dying := newLifetimeSA(t, 0x1001, key, sa.Lifetime{HardAdd: time.Minute})
	if err := n.sad.Replace(append(sas, dying), nil); err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(20, n.reapExpired); allocs != 0 {
		t.Errorf("reapExpired with 1001 SAs and none expired: %v allocations, want 0", allocs)
	}
	if len(events) != 0 {
		t.Fatalf("events with nothing expired: %v", events)
	}
	n.sad.Tick(dying.Added().Add(time.Minute))
	n.reapExpired()
	if len(events) != 1 || events[0].Kind != EventStateDeleted || events[0].SA != dying || events[0].Reason != "hard lifetime expired" {
		t.Errorf("events after the hard expiry: %+v, want the SA's deletion", events)
	}
}
