package ike

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/ipsecd/ipsecd/ike/dh"
	"github.com/ipsecd/ipsecd/ike/keys"
	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/ike/proposal"
)

// Rekeying the IKE SA (RFC 7296 §1.3.2, §2.18): a CREATE_CHILD_SA with an
// IKE proposal, our new SPI, a nonce and a key exchange makes the new
// SA; the children move to it, and the rekey's initiator deletes the
// old one. After simultaneous rekeys one of the two new SAs is
// redundant (§2.8.2, collide.go).

// ikeRekey is our rekey of the IKE SA.
type ikeRekey struct {
	spi  uint64 // our SPI of the new IKE SA
	ni   []byte
	priv *dh.Private
	// followup runs the additional key exchanges the answer chose.
	followup *followupKE
	// crossing is the IKE SA the peer's simultaneous rekey made, nil
	// when none came.
	crossing *crossing
}

// ReplacedTimeout is how long an IKE SA that the peer is to delete waits
// for that delete before it deletes itself: the old SA after the peer
// rekeyed it, and the redundant one of simultaneous rekeys (§2.8.2). A
// peer that never deletes them leaves none behind (strongSwan waits 90 s
// too).
const ReplacedTimeout = 90 * time.Second

// retire marks s as an SA the peer is to delete, since a rekey replaced
// it: it takes no CREATE_CHILD_SA from here on, and deletes itself at
// now + ReplacedTimeout if the peer has not.
func (s *SA) retire(now time.Time) {
	if s.retiredUntil.IsZero() {
		s.retiredUntil = now.Add(ReplacedTimeout)
	}
}

// retiredDeadline returns when a retired SA deletes itself (see
// retire), or the zero time.
func (s *SA) retiredDeadline() time.Time {
	if s.state != StateEstablished {
		return time.Time{}
	}
	return s.retiredUntil
}

// retiredExpired reports whether s is retired and its time is up.
func (s *SA) retiredExpired(now time.Time) bool {
	t := s.retiredDeadline()
	return !t.IsZero() && !now.Before(t)
}

// RekeyIKE starts rekeying the IKE SA (queued while a request of ours is
// outstanding, see Next). When the answer arrives, the events carry
// EventIKERekeyed with the new SA, and Handle returns the request that
// deletes this one.
func (s *SA) RekeyIKE(now time.Time) ([]byte, error) {
	if s.state != StateEstablished {
		return nil, ErrNotEstablished
	}
	if !s.retiredUntil.IsZero() {
		return nil, ErrRekeyed
	}
	return s.startOrQueue(work{op: workRekeyIKE}, func() (task, error) {
		spi, err := s.cfg.randomBytes(8)
		if err != nil {
			return nil, err
		}
		x := &ikeRekey{spi: binary.BigEndian.Uint64(spi) | 1}
		if x.priv, err = dh.New(s.cfg.Proposals[0].Groups()[0], s.cfg.rand()); err != nil {
			return nil, err
		}
		return x, nil
	}, now)
}

func (x *ikeRekey) request(s *SA) (message.ExchangeType, []message.Payload, error) {
	var err error
	if x.ni, err = s.cfg.randomBytes(nonceLen); err != nil {
		return 0, nil, err
	}
	return message.CreateChildSA, []message.Payload{
		{Type: message.TypeSA, Body: message.AppendSA(nil, proposal.MessagesMultiKE(s.cfg.Proposals, binary.BigEndian.AppendUint64(nil, x.spi)))},
		{Type: message.TypeNONC, Body: x.ni},
		{Type: message.TypeKE, Body: message.AppendKE(nil, x.priv.Group(), x.priv.Public())},
	}, nil
}

func (x *ikeRekey) drop(*SA) { x.priv.Clear() }

// response makes the new SA and deletes the one that is redundant now:
// s, or the new SA itself when it lost simultaneous rekeys.
func (x *ikeRekey) response(s *SA, ps []message.Payload, now time.Time) ([]byte, error) {
	sas, nr, err := createAnswer(s, ps, &x.priv, s.cfg.Proposals)
	if errors.Is(err, errNewGroup) {
		return s.start(x, now)
	}
	defer x.priv.Clear()
	if err != nil {
		return nil, err
	}
	gir, err := sharedOf(ps, x.priv)
	if err != nil {
		return nil, err
	}
	suite, err := proposal.CheckChoiceMultiKE(s.cfg.Proposals, sas)
	if err != nil || len(suite.SPI) != 8 || suite.DH.ID != x.priv.Group() {
		clear(gir)
		return nil, fmt.Errorf("%w: IKE rekey: %v", ErrProtocol, proposal.ErrBadChoice)
	}
	nr = append([]byte(nil), nr...)
	made := func(s *SA, gir, added []byte, now time.Time) ([]byte, error) {
		n, err := s.rekeyedSA(suite, x.spi, binary.BigEndian.Uint64(suite.SPI), x.ni, nr, gir, true, added)
		if err != nil {
			return nil, err
		}
		return s.settleIKERekey(x, n, nr, now)
	}
	if methods := suite.AddKEs(); len(methods) > 0 {
		// The new SA comes of all the exchanges (RFC 9370 §2.2.4).
		link, ok := addKELink(ps)
		if !ok {
			clear(gir)
			return nil, fmt.Errorf("%w: IKE rekey chose additional key exchanges without N(ADDITIONAL_KEY_EXCHANGE)", ErrProtocol)
		}
		x.followup = &followupKE{methods: methods, link: link, gir: gir, done: made, of: x}
		return s.start(x.followup, now)
	}
	defer clear(gir)
	return made(s, gir, nil, now)
}

// rekeyedSA makes the IKE SA that replaces s (§2.18): new SPIs, nonces
// and suite, SKEYSEED = prf(SK_d (old), g^ir (new) | Ni | Nr).
// weInitiated: we initiated the rekey, so we are the new SA's original
// initiator. The children move over later, with adopt, once it is sure
// the new SA survives (a collision may make it redundant).
func (s *SA) rekeyedSA(suite proposal.Suite, ispi, rspi uint64, ni, nr, gir []byte, weInitiated bool, addKE ...[]byte) (*SA, error) {
	n := &SA{cfg: s.cfg, initiator: weInitiated, local: s.local, remote: s.remote, state: StateEstablished, lastHeard: s.lastHeard, localID: s.localID, peerID: s.peerID, peerAuth: s.peerAuth, eapID: s.eapID, cfgReply: s.cfgReply, fragOK: s.fragOK,
		ispi: ispi, rspi: rspi, ikeSuite: suite, natLocal: s.natLocal, natRemote: s.natRemote}
	seed := keys.RekeySKEYSEED(s.prf, s.keys.D, gir, ni, nr, addKE...)
	if err := n.deriveIKEFrom(seed, ni, nr); err != nil {
		return nil, err
	}
	return n, nil
}

// adopt moves s's children to n, the IKE SA that replaces s
// (EventChildMoved); s is retired.
func (s *SA) adopt(n *SA, now time.Time) {
	for _, c := range s.children {
		s.events = append(s.events, Event{Kind: EventChildMoved, Child: c, SA: n})
	}
	n.children = append(n.children, s.children...)
	n.leases = append(n.leases, s.leases...)
	s.children, s.leases = nil, nil
	s.handOver(n)
	s.retire(now)
}

// answerIKERekey is the responder's side of an IKE SA rekey.
func (s *SA) answerIKERekey(req *createRequest) ([]message.Payload, error) {
	suite, err := proposal.SelectMultiKE(s.cfg.Proposals, req.sas)
	if err != nil || len(suite.SPI) != 8 {
		return []message.Payload{notify(message.NoProposalChosen, nil)}, fmt.Errorf("%w: IKE rekey: peer offered %s", ErrNoProposalChosen, proposal.FormatList(req.sas))
	}
	if !req.ke.IsValid() || req.ke.Group() != suite.DH.ID {
		return []message.Payload{notify(message.InvalidKEPayload, binary.BigEndian.AppendUint16(nil, suite.DH.ID))}, fmt.Errorf("%w: IKE rekey: want group %d", ErrInvalidKE, suite.DH.ID)
	}
	priv, err := dh.New(suite.DH.ID, s.cfg.rand())
	if err != nil {
		return []message.Payload{notify(message.TemporaryFailure, nil)}, err
	}
	defer priv.Clear() // after the answer took its public value
	gir, err := priv.Shared(req.ke.Data())
	if err != nil {
		return []message.Payload{notify(message.InvalidSyntax, nil)}, fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	nr, err := s.cfg.randomBytes(nonceLen)
	if err != nil {
		return []message.Payload{notify(message.TemporaryFailure, nil)}, err
	}
	spi, err := s.cfg.randomBytes(8)
	if err != nil {
		return []message.Payload{notify(message.TemporaryFailure, nil)}, err
	}
	rspi := binary.BigEndian.Uint64(spi) | 1
	ispi := binary.BigEndian.Uint64(suite.SPI)
	suite.SPI = binary.BigEndian.AppendUint64(nil, rspi)
	reply := []message.Payload{
		{Type: message.TypeSA, Body: message.AppendSA(nil, []message.Proposal{suite.Proposal()})},
		{Type: message.TypeNONC, Body: nr},
		{Type: message.TypeKE, Body: message.AppendKE(nil, priv.Group(), priv.Public())},
	}
	ni := req.ni
	made := func(s *SA, gir, added []byte) error {
		n, err := s.rekeyedSA(suite, ispi, rspi, ni, nr, gir, false, added)
		if err != nil {
			return err
		}
		// The daemon routes the new SPIs to n from now on. The
		// children move to it now, unless our own rekey collides: then
		// the nonces decide when our answer arrives.
		s.events = append(s.events, Event{Kind: EventIKERekeyed, SA: n})
		if !s.crossed(&crossing{sa: n, ni: ni, nr: nr}) {
			s.adopt(n, s.now)
		}
		return nil
	}
	defer clear(gir)
	if methods := suite.AddKEs(); len(methods) > 0 {
		// The new SA comes of all the exchanges, after the peer's
		// IKE_FOLLOWUP_KE (RFC 9370 §2.2.4).
		n, err := s.awaitFollowup(methods, gir, made)
		if err != nil {
			return []message.Payload{notify(message.TemporaryFailure, nil)}, err
		}
		return append(reply, n), nil
	}
	if err := made(s, gir, nil); err != nil {
		return []message.Payload{notify(message.TemporaryFailure, nil)}, err
	}
	return reply, nil
}
