package ike

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/ipsecd/ipsecd/ike/message"
)

// Exchanges after the handshake are tasks, one small type each, in
// files of their own: childCreate (child_create.go), childRekey
// (child_rekey.go), ikeRekey (ike_rekey.go), childDelete and ikeDelete
// (delete.go), liveness (liveness.go). A task builds our request and
// handles the peer's response; the same file answers the peer's request
// of that exchange. The SA runs one task of ours at a time (active, RFC
// 7296 §2.3), queues the rest (queue.go), retransmits every request the
// same way (window.go) and settles collisions between ours and the
// peer's in one place (collide.go).

// task is one exchange of ours, from its request to its response.
type task interface {
	// request returns the exchange type and payloads of the request.
	// It is called each time the task starts: again after
	// INVALID_KE_PAYLOAD, with fresh nonces. An error sends nothing.
	request(s *SA) (message.ExchangeType, []message.Payload, error)
	// response handles the decrypted answer. It may start the task
	// that follows (the delete after a rekey) and return its request.
	response(s *SA, ps []message.Payload, now time.Time) ([]byte, error)
	// drop ends the task unanswered (the IKE SA ended, or the request
	// could not be sent): it wipes what it holds secret (a DH private
	// key) and gives back what it took (an SPI: EventSPIUnused).
	drop(s *SA)
}

// start sends x's request and makes x the active task, whose response
// HandleFrom passes to it. On an error nothing is sent and x is
// dropped.
func (s *SA) start(x task, now time.Time) ([]byte, error) {
	ex, ps, err := x.request(s)
	if err == nil {
		var msg []byte
		if msg, err = s.request(ex, ps, now); err == nil {
			s.active = x
			return msg, nil
		}
	}
	x.drop(s)
	return nil, err
}

// startOrQueue starts x, or, while a request of ours is outstanding,
// queues w, from which Next makes the task again once the SA is idle.
func (s *SA) startOrQueue(w work, x func() (task, error), now time.Time) ([]byte, error) {
	if s.pending != nil {
		s.enqueue(w)
		return nil, nil
	}
	t, err := x()
	if err != nil {
		return nil, err
	}
	return s.start(t, now)
}

// finish hands the response to our active task and forgets it.
func (s *SA) finish(ps []message.Payload, now time.Time) ([]byte, error) {
	x := s.active
	s.active = nil
	if x == nil {
		return nil, nil
	}
	return x.response(s, ps, now)
}

// dropActive forgets our active task, which will not be answered (the
// IKE SA ended), and wipes what it holds.
func (s *SA) dropActive() {
	if s.active != nil {
		x := s.active
		s.active = nil
		x.drop(s)
	}
}

// createRequest is the peer's CREATE_CHILD_SA request, parsed.
type createRequest struct {
	ps  []message.Payload
	sas []message.Proposal
	ni  []byte
	ke  message.KE
	// rekey is the REKEY_SA notify, nil when none: the request rekeys
	// a child.
	rekey message.Notify
	ike   bool // the request rekeys the IKE SA
}

// rekeys reports whether req rekeys child c: its REKEY_SA names c's
// outbound SPI, the peer's inbound.
func (req *createRequest) rekeys(c *Child) bool {
	return req.rekey != nil && len(req.rekey.SPI()) == 4 && binary.BigEndian.Uint32(req.rekey.SPI()) == c.OutSPI
}

// answerCreate answers the peer's CREATE_CHILD_SA (§1.3) with the task
// of its kind: an IKE rekey, a child's rekey, or a new child.
func (s *SA) answerCreate(ps []message.Payload) ([]message.Payload, error) {
	sas, err := message.SA(message.Get(ps, message.TypeSA)).Proposals()
	ni := message.Get(ps, message.TypeNONC)
	if err != nil || !nonceOK(ni) {
		return []message.Payload{notify(message.InvalidSyntax, nil)}, fmt.Errorf("%w: CREATE_CHILD_SA without SA or nonce", ErrProtocol)
	}
	req := &createRequest{ps: ps, sas: sas, ni: append([]byte(nil), ni...), ke: message.KE(message.Get(ps, message.TypeKE)),
		ike: len(sas) > 0 && sas[0].Protocol == message.ProtoIKE}
	if n, ok := notifyOf(ps, message.RekeySA); ok {
		req.rekey = n
	}
	if err := s.admit(req); err != nil {
		return []message.Payload{notify(message.TemporaryFailure, nil)}, err
	}
	switch {
	case req.ike:
		return s.answerIKERekey(req)
	case req.rekey != nil:
		return s.answerChildRekey(req)
	}
	return s.answerChild(req, nil, func(made *crossing) { s.addChild(made.child, false) })
}
