package ike

import (
	"fmt"
	"slices"
	"time"

	"github.com/ipsecd/ipsecd/ike/message"
)

// Deletes (RFC 7296 §1.4.1) are INFORMATIONAL exchanges with Delete
// payloads: of a child, naming the sender's inbound SPI, the answer
// naming the responder's of the same pair; of the IKE SA and with it
// all its children, the answer empty. The peer's INFORMATIONAL requests,
// deletes, AUTHENTICATION_FAILED and liveness checks, are answered here
// (answerInformational).

// childDelete is our delete of child.
type childDelete struct{ child *Child }

// DeleteChild starts an INFORMATIONAL exchange that deletes child c
// (§1.4.1): the request names our inbound SPI; when the peer's answer
// arrives, EventChildDown reports c. Keep c installed until then: the
// peer may still send on it. While a request of ours is outstanding the
// delete waits in the queue and DeleteChild returns no request (see
// Next).
func (s *SA) DeleteChild(c *Child, now time.Time) ([]byte, error) {
	if s.state != StateEstablished || !slices.Contains(s.children, c) {
		return nil, ErrNoChild
	}
	return s.startOrQueue(work{op: workDeleteChild, child: c}, func() (task, error) { return &childDelete{c}, nil }, now)
}

func (x *childDelete) request(*SA) (message.ExchangeType, []message.Payload, error) {
	x.child.state = ChildDeleting
	return message.Informational, []message.Payload{{Type: message.TypeD,
		Body: message.AppendDelete(nil, message.ProtoESP, []uint32{x.child.InSPI})}}, nil
}

// response removes the child, unless the peer's own delete of it came
// first.
func (x *childDelete) response(s *SA, _ []message.Payload, _ time.Time) ([]byte, error) {
	s.removeChild(x.child)
	return nil, nil
}

func (x *childDelete) drop(*SA) {}

// removeChild removes c from the SA's children and reports it down.
// A child that replaces c and waits for its outbound SA gets it first
// (make-before-break): the peer rekeyed c and deletes it, or we delete
// it, so the peer has the new pair.
func (s *SA) removeChild(c *Child) {
	i := slices.Index(s.children, c)
	if i < 0 {
		return
	}
	for _, r := range s.children {
		if r.Replaces == c && r.outboundWaits && !r.Redundant {
			r.outboundWaits = false
			s.events = append(s.events, Event{Kind: EventChildOutbound, Child: r})
		}
	}
	s.children = slices.Delete(s.children, i, i+1)
	c.gone()
	s.events = append(s.events, Event{Kind: EventChildDown, Child: c})
}

// ikeDelete is our delete of the IKE SA.
type ikeDelete struct{}

// Delete starts an INFORMATIONAL exchange that deletes the IKE SA and its
// children; the SA is Deleted at once (RFC 7296 §1.4.1: the answer only
// confirms), and its children go with it. While a request of ours is
// outstanding the delete waits in the queue (one exchange at a time,
// §2.3), Delete returns no message and the SA stays Established until
// Next starts it. Send the returned message; it
// is a request like any other (§2.4): Tick retransmits it until the
// answer comes (HandleFrom takes it) or the tries run out, and a request
// of the peer's that crosses it is answered. Keep routing the SA's
// messages to it while NextTimeout is set. Its keys are wiped then, all
// but the SK ciphers at once.
func (s *SA) Delete(now time.Time) ([]byte, error) {
	if s.state != StateEstablished {
		return nil, ErrNotEstablished
	}
	if s.pending != nil {
		s.enqueue(work{op: workDelete})
		return nil, nil
	}
	msg, err := s.sendDelete(now)
	if err != nil {
		return nil, err
	}
	s.wipeEnded()
	return msg, nil
}

// sendDelete starts our delete of the IKE SA, which is Deleted at once.
func (s *SA) sendDelete(now time.Time) ([]byte, error) {
	msg, err := s.start(ikeDelete{}, now)
	if err != nil {
		return nil, err
	}
	s.deleted()
	return msg, nil
}

func (ikeDelete) request(*SA) (message.ExchangeType, []message.Payload, error) {
	return message.Informational, []message.Payload{{Type: message.TypeD, Body: message.AppendDelete(nil, message.ProtoIKE, nil)}}, nil
}

// response: the SA was Deleted when the delete was sent.
func (ikeDelete) response(*SA, []message.Payload, time.Time) ([]byte, error) { return nil, nil }

func (ikeDelete) drop(*SA) {}

// deleted ends the SA and its children. A request of ours that is
// outstanding stays so: the caller's own delete, retransmitted until
// answered (anything else the caller drops first).
func (s *SA) deleted() {
	s.state = StateDeleted
	s.queue = nil
	for _, c := range s.children {
		c.state = ChildDeleted
		s.events = append(s.events, Event{Kind: EventChildDown, Child: c})
	}
	s.children = nil
	s.events = append(s.events, Event{Kind: EventIKEDown})
	s.keys.Clear()
}

// answerInformational answers an INFORMATIONAL request (RFC 7296 §1.4):
// an empty one is a liveness check and gets an empty answer;
// AUTHENTICATION_FAILED ends the IKE SA and its children; a Delete of
// the IKE SA deletes it with all its children; a Delete of ESP SPIs (the
// peer's inbound ones, our outbound) deletes those children, and the
// answer names our inbound SPIs of the same pairs.
func (s *SA) answerInformational(ps []message.Payload) []message.Payload {
	if _, ok := notifyOf(ps, message.AuthenticationFailed); ok {
		// The peer could not authenticate us after all (§2.21.2): the
		// IKE SA and its children are of no use.
		s.err = fmt.Errorf("%w: the peer refused our AUTH", ErrAuthFailed)
		s.dropPending()
		s.deleted()
		return nil
	}
	var ours []uint32
	for _, p := range ps {
		if p.Type != message.TypeD {
			continue
		}
		d := message.Delete(p.Body)
		if !d.IsValid() {
			continue
		}
		switch d.Protocol() {
		case message.ProtoIKE:
			s.dropPending()
			s.deleted()
			return nil
		case message.ProtoESP:
			for _, spi := range d.SPIs() {
				i := slices.IndexFunc(s.children, func(c *Child) bool { return c.OutSPI == spi })
				if i < 0 {
					continue
				}
				c := s.children[i]
				ours = append(ours, c.InSPI)
				s.removeChild(c)
			}
		}
	}
	if len(ours) == 0 {
		return nil
	}
	return []message.Payload{{Type: message.TypeD, Body: message.AppendDelete(nil, message.ProtoESP, ours)}}
}

// dropPending forgets our outstanding request, which the peer will not
// answer: it deleted the IKE SA.
func (s *SA) dropPending() {
	s.pending, s.queue = nil, nil
	s.dropActive()
}
