package ike

import (
	"fmt"
	"math"
	"time"

	"github.com/ipsecd/ipsecd/ike/message"
)

// Busy reports whether a request of ours is outstanding: the next one
// (Delete, a rekey, a liveness check) waits in the queue for its answer
// or its last retransmission (RFC 7296 §2.3: a window of one).
func (s *SA) Busy() bool { return s.pending != nil }

// NextTimeout returns when Tick must be called next, or the zero time
// when no request is outstanding.
func (s *SA) NextTimeout() time.Time {
	if s.state == StateInitDone {
		return s.halfOpenUntil()
	}
	if s.pending == nil {
		return s.retiredDeadline()
	}
	return s.deadline
}

// HalfOpenTimeout is how long a responder waits for IKE_AUTH after
// answering IKE_SA_INIT before it forgets the SA (strongSwan's
// half_open_timeout).
const HalfOpenTimeout = 30 * time.Second

// halfOpenUntil is when a responder in StateInitDone gives up waiting
// for IKE_AUTH: at once when Wipe dropped its handshake.
func (s *SA) halfOpenUntil() time.Time {
	if s.hs == nil {
		return time.Time{}
	}
	return s.hs.halfOpenUntil
}

// Tick retransmits the outstanding request when its time has come, and
// fails the SA with ErrTimeout after the last try, or when a responder's
// half-open SA waited HalfOpenTimeout for IKE_AUTH. An SA that a rekey
// replaced, and that the peer did not delete within ReplacedTimeout, is
// deleted: Tick returns the delete to send, and the SA is Deleted. A
// Deleted SA's delete that went unanswered ends its retransmissions with
// ErrTimeout too, and nothing else: the SA was over already.
func (s *SA) Tick(now time.Time) ([]byte, error) {
	defer s.wipeEnded()
	if s.state == StateInitDone && !now.Before(s.halfOpenUntil()) {
		return nil, s.fail(fmt.Errorf("%w: no IKE_AUTH within %v", ErrTimeout, HalfOpenTimeout))
	}
	if s.pending == nil && s.retiredExpired(now) {
		return s.Delete(now)
	}
	if s.pending == nil || now.Before(s.deadline) {
		return nil, nil
	}
	r := s.cfg.retransmit()
	if s.tries >= r.Tries {
		if s.state == StateDeleted {
			return nil, s.fail(fmt.Errorf("%w: the delete was not answered", ErrTimeout))
		}
		return nil, s.fail(ErrTimeout)
	}
	s.tries++
	s.deadline = now.Add(time.Duration(float64(r.Timeout) * math.Pow(r.Base, float64(s.tries))))
	return s.pending, nil
}

// startRequest records msg as the outstanding request.
func (s *SA) startRequest(msg []byte, ex message.ExchangeType, now time.Time) []byte {
	s.pending, s.pendingEx, s.tries = msg, ex, 0
	s.deadline = now.Add(s.cfg.retransmit().Timeout)
	return msg
}

func (s *SA) header(ex message.ExchangeType, id uint32, response bool) message.HeaderFields {
	h := message.HeaderFields{ISPI: s.ispi, RSPI: s.rspi, Exchange: ex, MessageID: id}
	if s.initiator {
		h.Flags |= message.FlagInitiator
	}
	if response {
		h.Flags |= message.FlagResponse
	}
	return h
}

// request sends a new encrypted request of exchange ex.
func (s *SA) request(ex message.ExchangeType, ps []message.Payload, now time.Time) ([]byte, error) {
	if s.pending != nil {
		return nil, ErrBusy
	}
	msg, err := s.sealed(s.header(ex, s.nextID, false), ps)
	if err != nil {
		return nil, err
	}
	s.nextID++
	return s.startRequest(msg, ex, now), nil
}
