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
// SPI). An SA keeps its id while the server runs; ids of SAs gone are
// forgotten at their down event, or when a full listing no longer shows
// them. Safe for concurrent use; the zero value is ready.
type uniqueIDs struct {
	mu sync.Mutex
	// mu guards:
	nextIKE, nextChild uint32
	ike, child         map[string]*idEntry
}

type idEntry struct {
	id   uint32
	seen time.Time // when a listing or event last named it
}

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

// forgetIKE and forgetChild drop the id of an SA that went down.
func (u *uniqueIDs) forgetIKE(spiI, remote string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.ike, spiI+"/"+remote)
}

func (u *uniqueIDs) forgetChild(spiIn string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.child, spiIn)
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
