package ike

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ipsecd/ipsecd/ike/message"
)

// Rekeying a child (RFC 7296 §1.3.3): a CREATE_CHILD_SA with REKEY_SA
// naming the old child's SPI, with PFS when the ESP proposals name a
// group, then an INFORMATIONAL that deletes the old pair (or, after
// simultaneous rekeys, the redundant new one: collide.go).

// childRekey is our rekey of old: a childCreate with its selectors, mode
// and config.
type childRekey struct {
	childCreate
	old *Child
	// crossing is what the peer's simultaneous rekey of old made
	// (§2.8.1), nil when none came.
	crossing *crossing
}

// RekeyChild starts rekeying child c and returns the request to send;
// while a request of ours is outstanding it queues the rekey and returns
// none (see Next). When the answer arrives, Handle returns the INFORMATIONAL request that
// deletes the old pair, and the events say: EventChildUp with the new
// child (Replaces c), then EventChildDown for c once the peer confirmed.
func (s *SA) RekeyChild(c *Child, now time.Time) ([]byte, error) {
	if s.state != StateEstablished || !slices.Contains(s.children, c) {
		return nil, ErrNoChild
	}
	return s.startOrQueue(work{op: workRekeyChild, child: c}, func() (task, error) {
		x, err := newChildCreate(s, s.childConfig(c))
		if err != nil {
			return nil, err
		}
		x.transport, x.local, x.remote = c.Transport, c.LocalTS, c.RemoteTS
		return &childRekey{childCreate: *x, old: c}, nil
	}, now)
}

func (x *childRekey) request(s *SA) (message.ExchangeType, []message.Payload, error) {
	x.old.state = ChildRekeying
	ps, err := x.payloads(s)
	rekey := message.Payload{Type: message.TypeN,
		Body: message.AppendNotify(nil, message.ProtoESP, message.RekeySA, binary.BigEndian.AppendUint32(nil, x.old.InSPI), nil)}
	return message.CreateChildSA, append([]message.Payload{rekey}, ps...), err
}

// response takes the new child and starts the delete of the old pair,
// or of the new one when it lost simultaneous rekeys (settleChildRekey).
func (x *childRekey) response(s *SA, ps []message.Payload, now time.Time) ([]byte, error) {
	c, err := x.made(s, ps)
	if errors.Is(err, errNewGroup) {
		return s.start(x, now)
	}
	nr := append([]byte(nil), message.Get(ps, message.TypeNONC)...)
	if errors.Is(err, errFollowup) {
		x.followup.of = x
		x.followup.done = func(s *SA, gir, added []byte, now time.Time) ([]byte, error) {
			return x.replaced(s, x.child(gir, added), nr, now)
		}
		return s.start(x.followup, now)
	}
	if err != nil {
		x.drop(s)
		return nil, err
	}
	return x.replaced(s, c, nr, now)
}

// replaced takes c, the new child, in old's place, and starts the
// delete of old, or of c when it lost simultaneous rekeys; nr is the
// nonce of the peer's answer.
func (x *childRekey) replaced(s *SA, c *Child, nr []byte, now time.Time) ([]byte, error) {
	c.Replaces = x.old
	doomed := s.settleChildRekey(x, c, nr)
	s.addChild(c, c.Redundant)
	return s.start(&childDelete{child: doomed}, now)
}

// drop ends the rekey unanswered or failed: the old child stays up as
// it was, and may be rekeyed again.
func (x *childRekey) drop(s *SA) {
	x.childCreate.drop(s)
	if x.old.state == ChildRekeying {
		x.old.state = ChildInstalled
	}
}

// answerChildRekey answers the peer's rekey of one of our children.
func (s *SA) answerChildRekey(req *createRequest) ([]message.Payload, error) {
	var old *Child
	if len(req.rekey.SPI()) == 4 {
		if i := slices.IndexFunc(s.children, req.rekeys); i >= 0 {
			old = s.children[i]
		}
	}
	if old == nil {
		return []message.Payload{{Type: message.TypeN, Body: message.AppendNotify(nil, message.ProtoESP, message.ChildSANotFound, req.rekey.SPI(), nil)}},
			fmt.Errorf("%w: peer rekeys a child we do not have", ErrChildFailed)
	}
	if old.rekeyedBy != SideNone {
		// Replaced already, it waits for the peer's delete: rekeying it
		// again would only add children (§2.25.1, as for a child being
		// deleted).
		return []message.Payload{notify(message.TemporaryFailure, nil)}, fmt.Errorf("%w: peer rekeys a child it rekeyed already", ErrBusy)
	}
	// Our answer may be lost: the new child's outbound SA waits for
	// the peer's delete of old (removeChild), which proves the peer has
	// it. If our own rekey of old crosses this one, the nonces decide
	// later (settleChildRekey). With additional key exchanges, then
	// runs after the peer's IKE_FOLLOWUP_KE.
	return s.answerChild(req, old, func(made *crossing) {
		made.child.Replaces = old
		old.replacedBy(SidePeer)
		s.addChild(made.child, true)
		s.crossed(made)
	})
}
