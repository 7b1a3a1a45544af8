package ike

import (
	"bytes"
	"fmt"
	"time"

	"github.com/ipsecd/ipsecd/ike/dh"
	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/ike/proposal"
)

// IKE_FOLLOWUP_KE (RFC 9370 §2.2.4): when a CREATE_CHILD_SA chose
// additional key exchanges, its responder answers with
// N(ADDITIONAL_KEY_EXCHANGE) carrying a link, and the initiator runs one
// IKE_FOLLOWUP_KE exchange per additional exchange, in order, each with
// the KE of its method and the link of the answer before. The child is
// made from all the secrets once the last is done, those of the
// additional exchanges after the nonces (as strongSwan 6.1 does):
//
//	KEYMAT = prf+(SK_d, g^ir (new) | Ni | Nr | SK(1) | ... | SK(n))
//
// Here a child's creation and rekey (childCreate, childRekey) run them;
// an IKE SA's rekey with additional exchanges does not yet (its
// proposals go without them, and a peer's gets NO_PROPOSAL_CHOSEN).

// followupKE is our IKE_FOLLOWUP_KE exchanges of a CREATE_CHILD_SA.
type followupKE struct {
	methods []proposal.Alg // the additional exchanges still to run
	link    []byte         // the responder's N(ADDITIONAL_KEY_EXCHANGE)
	priv    *dh.Private
	gir     []byte // the CREATE_CHILD_SA's g^ir
	added   []byte // SK(1) | SK(2) | ..., so far
	// done completes the CREATE_CHILD_SA with all the secrets and
	// returns what follows (the delete after a rekey), if anything.
	done func(s *SA, gir, added []byte, now time.Time) ([]byte, error)
	// of is the task whose CREATE_CHILD_SA this continues: collisions
	// are settled with it (collide.go).
	of task
}

// continued returns the task x stands for: the one a followupKE
// continues, else x.
func continued(x task) task {
	if f, ok := x.(*followupKE); ok {
		return f.of
	}
	return x
}

// errFollowup: the CREATE_CHILD_SA answer chose additional key
// exchanges; the task's IKE_FOLLOWUP_KE exchanges come next.
var errFollowup = fmt.Errorf("ike: additional key exchanges follow")

// addKELink returns the data of the N(ADDITIONAL_KEY_EXCHANGE) among ps.
func addKELink(ps []message.Payload) ([]byte, bool) {
	n, ok := notifyOf(ps, message.AdditionalKeyExchange)
	if !ok || len(n.Data()) == 0 || len(n.Data()) > 64 {
		return nil, false
	}
	return append([]byte(nil), n.Data()...), true
}

func (x *followupKE) request(s *SA) (message.ExchangeType, []message.Payload, error) {
	var err error
	x.priv.Clear()
	if x.priv, err = dh.New(x.methods[0].ID, s.cfg.rand()); err != nil {
		return 0, nil, err
	}
	return message.IKEFollowupKE, []message.Payload{
		{Type: message.TypeKE, Body: message.AppendKE(nil, x.methods[0].ID, x.priv.Public())},
		notify(message.AdditionalKeyExchange, x.link),
	}, nil
}

// wipe clears the secrets the exchanges hold.
func (x *followupKE) wipe() {
	x.priv.Clear()
	clear(x.gir)
	clear(x.added)
}

// drop ends the exchanges unfinished, and with them the task they
// continue (which gives back its SPI, or leaves the old child as it
// was).
func (x *followupKE) drop(s *SA) {
	x.wipe()
	if x.of != nil {
		x.of.drop(s)
	}
}

// response adds the exchange's secret and runs the next exchange, or
// completes the CREATE_CHILD_SA after the last.
func (x *followupKE) response(s *SA, ps []message.Payload, now time.Time) ([]byte, error) {
	method := x.methods[0]
	if t, ok := firstError(ps); ok {
		x.drop(s)
		return nil, fmt.Errorf("%w: IKE_FOLLOWUP_KE (%s) answered with notify %d", ErrChildFailed, method.Name, t)
	}
	shared, err := sharedOf(ps, x.priv)
	x.priv.Clear()
	if err != nil {
		x.drop(s)
		return nil, err
	}
	x.added = append(x.added, shared...)
	clear(shared)
	x.methods = x.methods[1:]
	if len(x.methods) > 0 {
		link, ok := addKELink(ps)
		if !ok {
			x.drop(s)
			return nil, fmt.Errorf("%w: IKE_FOLLOWUP_KE answer without N(ADDITIONAL_KEY_EXCHANGE) for the next exchange", ErrProtocol)
		}
		x.link = link
		return s.start(x, now)
	}
	defer x.wipe()
	return x.done(s, x.gir, x.added, now)
}

// followupAnswer is, for the responder, a CREATE_CHILD_SA whose
// additional key exchanges the peer's IKE_FOLLOWUP_KE exchanges run.
type followupAnswer struct {
	methods    []proposal.Alg
	link       []byte
	gir, added []byte // as followupKE's
	// done makes what the CREATE_CHILD_SA creates from all the secrets.
	done func(s *SA, gir, added []byte) error
}

// awaitFollowup records a CREATE_CHILD_SA answered with additional key
// exchanges to come and returns the N(ADDITIONAL_KEY_EXCHANGE) of the
// answer. One such exchange waits at a time: the peer's next request is
// its IKE_FOLLOWUP_KE (its window is one, and it sends nothing else
// meanwhile).
func (s *SA) awaitFollowup(methods []proposal.Alg, gir []byte, done func(s *SA, gir, added []byte) error) (message.Payload, error) {
	link, err := s.cfg.randomBytes(8)
	if err != nil {
		return message.Payload{}, err
	}
	s.dropFollowup()
	s.followup = &followupAnswer{methods: methods, link: link, gir: append([]byte(nil), gir...), done: done}
	return notify(message.AdditionalKeyExchange, link), nil
}

// dropFollowup forgets a CREATE_CHILD_SA whose additional exchanges did
// not complete, and wipes its secrets.
func (s *SA) dropFollowup() {
	if s.followup != nil {
		clear(s.followup.gir)
		clear(s.followup.added)
		s.followup = nil
	}
}

// answerFollowupKE answers the peer's IKE_FOLLOWUP_KE: the KE of the
// next method, with a new link while more follow; after the last the
// child is made. A link we did not give gets STATE_NOT_FOUND (RFC 9370
// §2.2.4); a KE that does not parse or is of another method
// INVALID_SYNTAX, and the CREATE_CHILD_SA is forgotten.
func (s *SA) answerFollowupKE(ps []message.Payload) ([]message.Payload, error) {
	f := s.followup
	link, _ := addKELink(ps)
	if f == nil || !bytes.Equal(link, f.link) {
		// The peer's next request after our answer is its
		// IKE_FOLLOWUP_KE (a window of one): one of another link ends
		// the CREATE_CHILD_SA we wait on too.
		s.dropFollowup()
		return []message.Payload{notify(message.StateNotFound, nil)}, fmt.Errorf("%w: IKE_FOLLOWUP_KE for no CREATE_CHILD_SA of ours", ErrChildFailed)
	}
	method := f.methods[0]
	ke := message.KE(message.Get(ps, message.TypeKE))
	if !ke.IsValid() || ke.Group() != method.ID {
		s.dropFollowup()
		return []message.Payload{notify(message.InvalidSyntax, nil)}, fmt.Errorf("%w: IKE_FOLLOWUP_KE without a KE of %s", ErrChildFailed, method.Name)
	}
	priv, err := dh.New(method.ID, s.cfg.rand())
	var shared []byte
	if err == nil {
		shared, err = priv.Shared(ke.Data())
	}
	defer priv.Clear() // after the answer took its public value
	if err != nil {
		s.dropFollowup()
		return []message.Payload{notify(message.InvalidSyntax, nil)}, fmt.Errorf("%w: IKE_FOLLOWUP_KE (%s): %v", ErrChildFailed, method.Name, err)
	}
	f.added = append(f.added, shared...)
	clear(shared)
	f.methods = f.methods[1:]
	reply := []message.Payload{{Type: message.TypeKE, Body: message.AppendKE(nil, method.ID, priv.Public())}}
	if len(f.methods) > 0 {
		if f.link, err = s.cfg.randomBytes(8); err != nil {
			s.dropFollowup()
			return []message.Payload{notify(message.TemporaryFailure, nil)}, err
		}
		return append(reply, notify(message.AdditionalKeyExchange, f.link)), nil
	}
	s.followup = nil
	defer func() { clear(f.gir); clear(f.added) }()
	return reply, f.done(s, f.gir, f.added)
}
