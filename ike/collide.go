package ike

import (
	"bytes"
	"fmt"
	"time"
)

// Collisions between our exchange under way and the peer's request are
// settled here alone, as strongSwan's task manager and child_rekey's
// collide do:
//
//   - The peer rekeys the child we rekey (§2.8.1), or the IKE SA while we
//     rekey it (§2.8.2): both go ahead (admit), what the peer's made is
//     recorded in our task (crossed), and when our answer comes, the new
//     SA made with the lowest of the four nonces is redundant; its maker
//     deletes it, and the maker of the other deletes the old one
//     (settleChildRekey, settleIKERekey). A redundant child is marked so
//     on both sides: its outbound SA never goes in, and only the
//     winner's replaces the old child (make-before-break, as for any
//     rekey of the peer's: its outbound SA when the old one goes).
//   - Any other CREATE_CHILD_SA while we create, rekey or delete
//     something, or on an IKE SA a rekey replaced, is answered
//     TEMPORARY_FAILURE (§2.25) and the peer retries; so is a rekey of a
//     child rekeyed already (answerChildRekey).
//   - The peer deletes what we rekey or delete: its delete is answered as
//     usual (answerInformational); our rekey of a child the peer deleted
//     meanwhile was answered TEMPORARY_FAILURE by the peer (§2.25.1) and
//     fails; a delete of ours that crosses the peer's finds the child
//     gone and removes nothing more.
//   - Requests of the peer that cross our IKE SA delete are answered
//     (INFORMATIONAL) or refused with TEMPORARY_FAILURE (handleRequest).

// crossing is what we made answering the peer's CREATE_CHILD_SA (a child,
// or an IKE SA), with the exchange's nonces: its request's and our
// answer's.
type crossing struct {
	child  *Child
	sa     *SA
	ni, nr []byte
}

// admit decides whether the peer's CREATE_CHILD_SA req may go ahead
// beside our exchange under way; an error wrapping ErrBusy says it is
// answered TEMPORARY_FAILURE.
func (s *SA) admit(req *createRequest) error {
	if !s.retiredUntil.IsZero() {
		// A rekey replaced this IKE SA (or made it redundant): it is
		// on its way out, and neither a rekey of it nor a child goes
		// on it (§2.25.2). Its successor takes them.
		return fmt.Errorf("%w: the IKE SA was rekeyed", ErrBusy)
	}
	switch x := continued(s.active).(type) {
	case *childRekey:
		if req.rekey != nil && !req.ike && x.crossing == nil && req.rekeys(x.old) {
			return nil
		}
	case *ikeRekey:
		if req.ike && x.crossing == nil {
			return nil
		}
	case *childCreate, *childDelete:
	default:
		return nil // a liveness check, or nothing of ours under way
	}
	return ErrBusy
}

// crossed records what the peer's rekey made in our rekey of the same
// child or IKE SA under way (admit let nothing else through), to be
// settled when our answer comes. It reports whether there was one.
func (s *SA) crossed(theirs *crossing) bool {
	switch x := continued(s.active).(type) {
	case *childRekey:
		if theirs.child != nil {
			x.crossing = theirs
			return true
		}
	case *ikeRekey:
		if theirs.sa != nil {
			x.crossing = theirs
			return true
		}
	}
	return false
}

// lostTo reports whether our exchange, of nonces ni and nr, made the
// redundant one of simultaneous rekeys, theirs crossing it: the one made
// with the lowest of the four nonces (§2.8.1, §2.8.2).
func lostTo(theirs *crossing, ni, nr []byte) bool {
	return theirs != nil && lowest(ni, nr, theirs.ni, theirs.nr) < 2
}

// lowest returns the index of the lowest nonce (compared as unsigned
// big-endian numbers of their bytes, as strongSwan does with memcmp).
func lowest(nonces ...[]byte) int {
	low := 0
	for i, n := range nonces {
		if bytes.Compare(n, nonces[low]) < 0 {
			low = i
		}
	}
	return low
}

// settleChildRekey returns the child our rekey x deletes now that its
// answer (nonce nr) made c (§1.3.3), and says which child is redundant.
// No collision, or ours won: the old pair goes, replaced by c; a child
// the peer's crossing rekey made is Redundant, its outbound SA never
// installed, and the peer deletes it. Ours lost: c is Redundant (its
// outbound SA never installed) and we delete it; the peer's child
// replaces the old pair, which the peer deletes.
func (s *SA) settleChildRekey(x *childRekey, c *Child, nr []byte) *Child {
	if !lostTo(x.crossing, x.ni, nr) {
		if x.crossing != nil {
			x.crossing.child.Replaces, x.crossing.child.Redundant = nil, true
		}
		x.old.replacedBy(SideUs)
		return x.old
	}
	c.Replaces, c.Redundant = nil, true
	x.old.replacedBy(SidePeer)
	return c
}

// settleIKERekey completes our IKE rekey x, whose answer (nonce nr) made
// n, and returns the delete to send. Ours survives, or there was no
// collision: the children move to n and s is deleted; a colliding SA of
// the peer's is redundant, and the peer deletes it (it is retired
// meanwhile). Ours lost: n is deleted at once and never used
// (EventIKEDeleting); the peer's new SA gets the children, and the peer
// deletes s.
func (s *SA) settleIKERekey(x *ikeRekey, n *SA, nr []byte, now time.Time) ([]byte, error) {
	if theirs := x.crossing; lostTo(theirs, x.ni, nr) {
		msg, err := n.sendDelete(now)
		if err != nil {
			return nil, err
		}
		n.TakeEvents() // it never carried a child or was reported up
		n.wipeEnded()  // all but the SK ciphers, for its delete's answer
		s.events = append(s.events, Event{Kind: EventIKEDeleting, SA: n})
		s.adopt(theirs.sa, now)
		return msg, nil
	}
	if x.crossing != nil {
		x.crossing.sa.retire(now)
	}
	s.events = append(s.events, Event{Kind: EventIKERekeyed, SA: n})
	s.adopt(n, now)
	return s.sendDelete(now) // outstanding until answered: Tick retransmits it
}
