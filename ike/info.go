package ike

import (
	"fmt"
	"slices"
	"time"

	"github.com/ipsecd/ipsecd/ike/message"
)

// handleInformational answers an INFORMATIONAL request (RFC 7296 §1.4):
// an empty one is a liveness check and gets an empty answer;
// AUTHENTICATION_FAILED ends the IKE SA and its children; a Delete of
// the IKE SA deletes it with all its children; a Delete of ESP SPIs (the
// peer's inbound ones, our outbound) deletes those children, and the
// answer names our inbound SPIs of the same pairs.
func (s *SA) handleInformational(ps []message.Payload) []message.Payload {
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
				s.children = slices.Delete(s.children, i, i+1)
				c.gone()
				ours = append(ours, c.InSPI)
				s.events = append(s.events, Event{Kind: EventChildDown, Child: c})
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
	s.pending, s.create, s.deleting, s.queue = nil, nil, nil, nil
}

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
	if s.pending != nil {
		s.enqueue(work{op: workDeleteChild, child: c})
		return nil, nil
	}
	msg, err := s.request(message.Informational, []message.Payload{{Type: message.TypeD,
		Body: message.AppendDelete(nil, message.ProtoESP, []uint32{c.InSPI})}}, now)
	if err != nil {
		return nil, err
	}
	s.deleting = c
	return msg, nil
}
