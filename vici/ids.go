package vici

import (
	"sync"
	"time"
)

// uniqueIDs gives IKE SAs and children the unique ids charon numbers
// them with (swanctl shows them as #N, and terminate and list-sas select
// by them): ipsecd's SAs have none, so the server counts them in the
// order it first sees them, keyed by what names them for good (an IKE
// SA: its initiator SPI and the peer's address; a child: its inbound
// SPI). An SA keeps its id while the server runs. The id of an SA that
// went down is kept for forgetAfter more, so that every client's copy of
// its down event names it alike, then forgotten; a full listing forgets
// those it did not show. Safe for concurrent use; the zero value is
// ready.
type uniqueIDs struct {
	mu sync.Mutex
	// mu guards:
	nextIKE, nextChild uint32
	ike, child         map[string]*idEntry
	gone               []goneID // in the order they went down
}

type idEntry struct {
	id   uint32
	seen time.Time // when a listing or event last named it
	gone time.Time // when its down event came; zero while up
}

type goneID struct {
	m   map[string]*idEntry
	key string
}

// forgetAfter is how long the id of an SA that went down is kept: the
// event queues of the clients (control.MonitorQueue events each) are
// drained well within it.
const forgetAfter = 30 * time.Second

func (u *uniqueIDs) get(m *map[string]*idEntry, next *uint32, key string, now time.Time) uint32 {
	if *m == nil {
		*m = map[string]*idEntry{}
	}
	e := (*m)[key]
	if e == nil {
		*next++
		e = &idEntry{id: *next}
		(*m)[key] = e
	}
	e.seen = now
	return e.id
}

// ikeID returns the id of the IKE SA with initiator SPI spiI and peer
// address remote.
func (u *uniqueIDs) ikeID(spiI, remote string, now time.Time) uint32 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.get(&u.ike, &u.nextIKE, spiI+"/"+remote, now)
}

// childID returns the id of the child with inbound SPI spiIn.
func (u *uniqueIDs) childID(spiIn string, now time.Time) uint32 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.get(&u.child, &u.nextChild, spiIn, now)
}

// forgetIKE and forgetChild mark the id of an SA that went down, to be
// forgotten forgetAfter from now.
func (u *uniqueIDs) forgetIKE(spiI, remote string, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.forgetLocked(u.ike, spiI+"/"+remote, now)
}

func (u *uniqueIDs) forgetChild(spiIn string, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.forgetLocked(u.child, spiIn, now)
}

func (u *uniqueIDs) forgetLocked(m map[string]*idEntry, key string, now time.Time) {
	if e := m[key]; e != nil && e.gone.IsZero() {
		e.gone = now
		u.gone = append(u.gone, goneID{m, key})
	}
	// Forget those that went down long enough ago, oldest first.
	i := 0
	for ; i < len(u.gone); i++ {
		g := u.gone[i]
		e := g.m[g.key]
		if e != nil && now.Sub(e.gone) < forgetAfter {
			break
		}
		if e != nil {
			delete(g.m, g.key)
		}
	}
	u.gone = u.gone[i:]
}

// prune drops the ids not seen since before, after a listing of every
// SA that began at before: what it did not show is gone.
func (u *uniqueIDs) prune(before time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, m := range []map[string]*idEntry{u.ike, u.child} {
		for k, e := range m {
			if e.seen.Before(before) {
				delete(m, k)
			}
		}
	}
}

// size returns how many ids are kept, for tests.
func (u *uniqueIDs) size() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.ike) + len(u.child)
}
