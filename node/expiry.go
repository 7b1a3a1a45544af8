package node

import (
	"fmt"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/sa"
)

// routineTick runs the add-time lifetimes once a second, and logs
// lifetime events and removes hard-expired SAs as soon as the data path
// queues them (at the latest on the next second, should an event be lost).
func (n *Node) routineTick() {
	defer n.routines.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	wake := n.expiry.wakeup()
	for {
		select {
		case <-n.ctx.Done():
			return
		case now := <-t.C:
			n.sad.Tick(now)
		case <-wake:
		}
		n.logExpiries()
		n.reapExpired()
	}
}

// maxQueuedExpiries bounds the lifetime events waiting for tick. Each SA
// raises at most two, so only a mass expiry of thousands of SAs within a
// second can fill it; the events beyond are counted and reported, and
// their SAs are still removed by tick's sweep.
const maxQueuedExpiries = 4096

// expiryQueue hands lifetime events from the data path (sa's event
// handler, which must not block) to the node's tick goroutine. The zero
// value is ready to use; it is safe for concurrent use.
type expiryQueue struct {
	mu sync.Mutex
	// mu guards: events, lost and wake, which is made on first use.
	events []sa.Event
	lost   int
	wake   chan struct{}
}

// push queues ev and wakes the reader. It holds the lock for an append
// and never waits for the reader.
func (q *expiryQueue) push(ev sa.Event) {
	q.mu.Lock()
	if len(q.events) < maxQueuedExpiries {
		q.events = append(q.events, ev)
	} else {
		q.lost++
	}
	wake := q.wakeLocked()
	q.mu.Unlock()
	select {
	case wake <- struct{}{}:
	default: // already signalled
	}
}

// wakeup returns the channel that receives a value after push.
func (q *expiryQueue) wakeup() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.wakeLocked()
}

func (q *expiryQueue) wakeLocked() chan struct{} {
	if q.wake == nil {
		q.wake = make(chan struct{}, 1)
	}
	return q.wake
}

// take returns the queued events, oldest first, and how many were lost
// since the last take.
func (q *expiryQueue) take() ([]sa.Event, int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	events, lost := q.events, q.lost
	q.events, q.lost = nil, 0
	return events, lost
}

// saFields names an SA in a log line: the fields of `ip xfrm state`'s
// id, never its keys.
func saFields(s *sa.SA) logrus.Fields {
	return logrus.Fields{
		"spi":   fmt.Sprintf("%#x", s.SPI()),
		"dir":   s.Dir().String(),
		"src":   s.Src().String(),
		"dst":   s.Dst().String(),
		"if_id": s.IfID(),
	}
}

// logExpiries logs the queued lifetime events, one line each:
//
//	level=warning msg="SA lifetime expired" dir=out dst=192.0.2.2 if_id=1 kind=soft reason=packets spi=0x1001 src=192.0.2.1
//
// kind is soft (the SA is dying: it keeps working until a fresh SA with
// the same selector takes over, or until its hard limit) or hard (it
// stops and is removed); reason is the limit: bytes, packets, add time or
// sequence number.
func (n *Node) logExpiries() {
	events, lost := n.expiry.take()
	for _, ev := range events {
		if n.events != nil {
			n.mu.Lock() // the events' order is the Node's changes' order
			n.events(Event{Kind: EventStateExpired, SA: ev.SA, Expire: ev.Kind.String(), Reason: ev.Reason})
			n.mu.Unlock()
		}
		n.log.WithFields(saFields(ev.SA)).WithFields(logrus.Fields{
			"kind":   ev.Kind.String(),
			"reason": ev.Reason,
		}).Warn("SA lifetime expired")
	}
	if lost != 0 {
		n.log.WithField("lost", lost).Warn("SA lifetime events lost (too many at once); hard-expired SAs are removed all the same")
	}
}

// reapExpired removes the hard-expired SAs from the SAD, as Linux deletes
// a state once its hard lifetime expires, and logs each. It holds n.mu so
// that a reload or control change never works from an SA that is being
// removed (and whose keys are being wiped), and forgets their owners.
func (n *Node) reapExpired() {
	n.mu.Lock()
	// Runs every second: with nothing expired it walks the SAD and
	// allocates nothing (a snapshot to compare with, as other changes
	// take, was 1.5 MB/s of garbage with 10,000 SAs).
	removed := n.sad.RemoveExpired()
	for _, s := range removed {
		n.forgetLocked(s)
		if n.events != nil {
			n.events(Event{Kind: EventStateDeleted, SA: s, Reason: "hard lifetime expired"})
		}
	}
	n.mu.Unlock()
	for _, s := range removed {
		n.log.WithFields(saFields(s)).Info("SA removed: its hard lifetime expired")
	}
}
