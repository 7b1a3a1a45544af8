package ike

import (
	"errors"
	"slices"
	"time"
)

// Our requests go one at a time (RFC 7296 §2.3: a window of one). What
// the caller asks for while one is outstanding (RekeyChild, RekeyIKE,
// CreateChild, DeleteChild, Delete, Ping) waits in the SA's queue, and
// Next starts it once the SA is idle: the caller need not retry.

// workOp is the kind of a request that waits.
type workOp uint8

const (
	workCreateChild workOp = iota + 1
	workRekeyChild
	workRekeyIKE
	workDeleteChild
	workDelete
	workPing
)

// work is one request of ours that waits for its turn.
type work struct {
	op    workOp
	child *Child // workRekeyChild, workDeleteChild
	name  string // workCreateChild: the child config's name
}

// enqueue adds w to the queue, unless the same work waits already.
func (s *SA) enqueue(w work) {
	if !slices.Contains(s.queue, w) {
		s.queue = append(s.queue, w)
	}
}

// Queued reports how many requests of ours wait for the outstanding one.
func (s *SA) Queued() int { return len(s.queue) }

// Creating reports whether the creation of the child named name is under
// way in a CREATE_CHILD_SA of ours, or waits in the queue.
func (s *SA) Creating(name string) bool {
	if name == "" {
		name = s.cfg.Child.Name
	}
	if x, ok := s.active.(*childCreate); ok && x.cfg.Name == name {
		return true
	}
	return slices.ContainsFunc(s.queue, func(w work) bool {
		return w.op == workCreateChild && (w.name == name || w.name == "" && s.cfg.Child.Name == name)
	})
}

// CreatingNow returns the name of the child whose creation by a
// CREATE_CHILD_SA of ours is outstanding, or "".
func (s *SA) CreatingNow() string {
	if x, ok := s.active.(*childCreate); ok {
		return x.cfg.Name
	}
	return ""
}

// CancelCreate drops the creations of the child named name that wait in
// the queue (one under way goes on).
func (s *SA) CancelCreate(name string) {
	s.queue = slices.DeleteFunc(s.queue, func(w work) bool { return w.op == workCreateChild && w.name == name })
}

// Next starts the first request that waits, when the SA is established
// and none of ours is outstanding, and returns it to send (nil when
// nothing starts). Call it after each call that may have completed an
// exchange (HandleFrom, Tick) and after an EventIKERekeyed for the new
// SA, to which the work of the old one moved. Work that no longer
// applies is dropped: the rekey or delete of a child that is gone or was
// rekeyed meanwhile, the creation of a child that came up meanwhile (by
// the peer's CREATE_CHILD_SA). An error says why a request could not be
// built; the rest of the queue waits for the next call.
func (s *SA) Next(now time.Time) ([]byte, error) {
	for len(s.queue) > 0 && s.pending == nil && s.state == StateEstablished {
		w := s.queue[0]
		s.queue = s.queue[1:]
		var msg []byte
		var err error
		switch w.op {
		case workCreateChild:
			if s.hasChild(w.name) {
				continue
			}
			msg, err = s.CreateChild(w.name, now)
		case workRekeyChild:
			if w.child.rekeyedBy != SideNone {
				continue
			}
			msg, err = s.RekeyChild(w.child, now)
		case workRekeyIKE:
			msg, err = s.RekeyIKE(now)
		case workDeleteChild:
			msg, err = s.DeleteChild(w.child, now)
		case workDelete:
			msg, err = s.Delete(now)
		case workPing:
			msg, err = s.Ping(now)
		}
		if errors.Is(err, ErrNoChild) || errors.Is(err, ErrRekeyed) {
			continue
		}
		return msg, err
	}
	return nil, nil
}

// hasChild reports whether a child of the config named name is up (not
// one made redundant by a collision).
func (s *SA) hasChild(name string) bool {
	if name == "" {
		name = s.cfg.Child.Name
	}
	return slices.ContainsFunc(s.children, func(c *Child) bool { return c.Name == name && !c.Redundant })
}

// handOver moves the work that waits on s to n, the IKE SA that replaces
// it: the children's and the delete, which concern n now. A rekey of s
// and a liveness check of s are done with.
func (s *SA) handOver(n *SA) {
	for _, w := range s.queue {
		if w.op != workRekeyIKE && w.op != workPing {
			n.enqueue(w)
		}
	}
	s.queue = nil
}
