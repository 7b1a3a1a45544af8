package ike

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ipsecd/ipsecd/ike/dh"
	"github.com/ipsecd/ipsecd/ike/keys"
	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/ike/proposal"
)

// CREATE_CHILD_SA (RFC 7296 §1.3): rekeying a child (§1.3.3, with PFS
// when the ESP proposals name a group) and rekeying the IKE SA (§1.3.2,
// §2.18), and creating a further child of the connection under the IKE
// SA (§1.3.1): any of its children, the one whose selectors the peer's
// offer meets (selectChild), up to Config.MaxChildren.

// pendingCreate is our outstanding CREATE_CHILD_SA request.
type pendingCreate struct {
	ike    bool         // an IKE SA rekey; else a child, new or rekeyed
	old    *Child       // child rekey: the child it replaces; nil for a new one
	cfg    *ChildConfig // child: the config it is made from
	inSPI  uint32       // child: our new inbound SPI
	newSPI uint64       // IKE rekey: our SPI of the new IKE SA
	ni     []byte
	priv   *dh.Private // nil without PFS
	// theirs is the child the peer's simultaneous rekey of old made
	// (§2.8.1), with the nonces of its exchange.
	theirs         *Child
	theirNi, ourNr []byte
	// theirsIKE is the IKE SA the peer's simultaneous IKE rekey made
	// (§2.8.2), with the nonces in theirNi and ourNr.
	theirsIKE *SA
}

// ErrBusy wraps the error of a peer's request refused with
// TEMPORARY_FAILURE (§2.25): an exchange under way overlaps it, and the
// peer retries. (Our own requests wait in the queue instead, see Next.)
var ErrBusy = errors.New("ike: an exchange is outstanding")

// Errors of the calls that start an exchange (RekeyIKE, RekeyChild,
// CreateChild, DeleteChild, Delete, Ping) on an SA that cannot take it:
// nothing was sent, and the SA is unchanged.
var (
	// ErrNotEstablished: the IKE SA is not up (yet, or any more). Wait
	// for EventIKEUp, or start again with a new SA.
	ErrNotEstablished = errors.New("ike: IKE SA is not established")
	// ErrRekeyed: the IKE SA was rekeyed; ask the new one (the
	// EventIKERekeyed's SA), which holds the children now.
	ErrRekeyed = errors.New("ike: IKE SA was rekeyed")
	// ErrNoChild: the child is not one of the IKE SA's (any more), or
	// the IKE SA is not up. Look it up again in Children.
	ErrNoChild = errors.New("ike: no such child on an established IKE SA")
)

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

// RekeyChild starts rekeying child c and returns the request to send;
// while a request of ours is outstanding it queues the rekey and returns
// none (see Next). When the answer arrives, Handle returns the INFORMATIONAL request that
// deletes the old pair, and the events say: EventChildUp with the new
// child (Replaces c), then EventChildDown for c once the peer confirmed.
func (s *SA) RekeyChild(c *Child, now time.Time) ([]byte, error) {
	if s.state != StateEstablished || !slices.Contains(s.children, c) {
		return nil, ErrNoChild
	}
	if s.pending != nil {
		s.enqueue(work{op: workRekeyChild, child: c})
		return nil, nil
	}
	pc := &pendingCreate{old: c, cfg: s.childConfig(c)}
	var err error
	if pc.inSPI, err = s.cfg.newSPI(); err != nil {
		return nil, err
	}
	if groups := pc.cfg.Proposals[0].Groups(); len(groups) > 0 {
		if pc.priv, err = dh.New(groups[0], s.cfg.rand()); err != nil {
			return nil, err
		}
	}
	return s.sendCreate(pc, now)
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
	if s.pending != nil {
		s.enqueue(work{op: workRekeyIKE})
		return nil, nil
	}
	pc := &pendingCreate{ike: true}
	spi, err := s.cfg.randomBytes(8)
	if err != nil {
		return nil, err
	}
	pc.newSPI = binary.BigEndian.Uint64(spi) | 1
	if pc.priv, err = dh.New(s.cfg.Proposals[0].Groups()[0], s.cfg.rand()); err != nil {
		return nil, err
	}
	return s.sendCreate(pc, now)
}

func (s *SA) sendCreate(pc *pendingCreate, now time.Time) ([]byte, error) {
	var err error
	if pc.ni, err = s.cfg.randomBytes(nonceLen); err != nil {
		return nil, err
	}
	var ps []message.Payload
	if !pc.ike {
		if pc.old != nil {
			ps = append(ps, message.Payload{Type: message.TypeN,
				Body: message.AppendNotify(nil, message.ProtoESP, message.RekeySA, binary.BigEndian.AppendUint32(nil, pc.old.InSPI), nil)})
		}
		if pc.transport() {
			ps = append(ps, notify(message.UseTransportMode, nil))
		}
		ps = append(ps, message.Payload{Type: message.TypeSA,
			Body: message.AppendSA(nil, proposal.Messages(pc.cfg.Proposals, binary.BigEndian.AppendUint32(nil, pc.inSPI)))})
	} else {
		ps = append(ps, message.Payload{Type: message.TypeSA,
			Body: message.AppendSA(nil, proposal.Messages(s.cfg.Proposals, binary.BigEndian.AppendUint64(nil, pc.newSPI)))})
	}
	ps = append(ps, message.Payload{Type: message.TypeNONC, Body: pc.ni})
	if pc.priv != nil {
		ps = append(ps, message.Payload{Type: message.TypeKE, Body: message.AppendKE(nil, pc.priv.Group(), pc.priv.Public())})
	}
	if !pc.ike {
		local, remote := pc.selectors(s)
		ps = append(ps,
			message.Payload{Type: message.TypeTSi, Body: message.AppendTS(nil, local)},
			message.Payload{Type: message.TypeTSr, Body: message.AppendTS(nil, remote)})
	}
	msg, err := s.request(message.CreateChildSA, ps, now)
	if err != nil {
		return nil, err
	}
	s.create = pc
	return msg, nil
}

// handleCreateResponse completes our CREATE_CHILD_SA.
func (s *SA) handleCreateResponse(ps []message.Payload, now time.Time) ([]byte, error) {
	pc := s.create
	s.create = nil
	if pc == nil {
		return nil, nil
	}
	// This exchange's private key, whatever comes of it (a retry in
	// another group makes a new one).
	defer pc.priv.Clear()
	if n, ok := notifyOf(ps, message.InvalidKEPayload); ok && pc.priv != nil && len(n.Data()) == 2 {
		g := binary.BigEndian.Uint16(n.Data())
		var offered []proposal.Proposal
		if pc.cfg != nil {
			offered = pc.cfg.Proposals
		}
		if pc.ike {
			offered = s.cfg.Proposals
		}
		if g == pc.priv.Group() || !offersGroup(offered, g) {
			return nil, fmt.Errorf("%w: %d", ErrInvalidKE, g)
		}
		var err error
		if pc.priv, err = dh.New(g, s.cfg.rand()); err != nil {
			return nil, err
		}
		return s.sendCreate(pc, now) // a new exchange with the group asked for (§1.3)
	}
	if t, ok := firstError(ps); ok {
		return nil, fmt.Errorf("%w: CREATE_CHILD_SA answered with notify %d", childRefused(t), t)
	}
	sas, err := message.SA(message.Get(ps, message.TypeSA)).Proposals()
	nr := message.Get(ps, message.TypeNONC)
	if err != nil || len(nr) < 16 || len(nr) > 256 {
		return nil, fmt.Errorf("%w: CREATE_CHILD_SA response without SA or nonce", ErrProtocol)
	}
	// A child's PFS is the chosen proposal's: offered our KE, the
	// responder may still choose one of our proposals without a group,
	// and then answers without KE (RFC 7296 §1.3.1, §3.4).
	var esp proposal.Suite
	needKE := pc.priv != nil
	if !pc.ike {
		esp, err = proposal.CheckChoice(pc.cfg.Proposals, sas, pc.priv == nil)
		if err != nil || len(esp.SPI) != 4 || esp.DH.Name != "" && esp.DH.ID != pc.priv.Group() {
			return nil, fmt.Errorf("%w: %v", ErrChildFailed, proposal.ErrBadChoice)
		}
		needKE = esp.DH.Name != ""
	}
	var gir []byte
	if needKE {
		ke := message.KE(message.Get(ps, message.TypeKE))
		if !ke.IsValid() || ke.Group() != pc.priv.Group() {
			return nil, fmt.Errorf("%w: CREATE_CHILD_SA response without our group's KE", ErrProtocol)
		}
		if gir, err = pc.priv.Shared(ke.Data()); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrProtocol, err)
		}
	}
	if pc.ike {
		return s.completeIKERekey(pc, sas, nr, gir, now)
	}
	tsi, err1 := message.TS(message.Get(ps, message.TypeTSi)).Selectors()
	tsr, err2 := message.TS(message.Get(ps, message.TypeTSr)).Selectors()
	sentLocal, sentRemote := pc.selectors(s)
	if err1 != nil || err2 != nil || !within(tsi, sentLocal) || !within(tsr, sentRemote) {
		return nil, fmt.Errorf("%w: %w: the answer widened the selectors", ErrChildFailed, ErrTSUnacceptable)
	}
	outSPI := binary.BigEndian.Uint32(esp.SPI)
	esp.SPI = binary.BigEndian.AppendUint32(nil, pc.inSPI)
	_, transport := notifyOf(ps, message.UseTransportMode)
	c := s.newChild(pc.cfg, esp, pc.inSPI, outSPI, tsi, tsr, transport && pc.transport(), gir, pc.ni, nr, true)
	clear(gir)
	c.Replaces = pc.old
	if pc.old != nil {
		pc.old.rekeyed = true
	}
	s.children = append(s.children, c)
	s.events = append(s.events, Event{Kind: EventChildUp, Child: c})
	if pc.old == nil {
		return nil, nil // a new child: nothing to delete
	}
	// Delete the old pair (§1.3.3): name our inbound SPI. After a
	// collision (§2.8.1) the child made with the lowest of the four
	// nonces is redundant and its maker deletes it; the maker of the
	// survivor deletes the old pair.
	doomed := pc.old
	if pc.theirs != nil && lowest(pc.ni, nr, pc.theirNi, pc.ourNr) < 2 {
		// Ours is redundant: it carries no traffic and goes; the peer
		// deletes the old pair.
		doomed, c.Replaces, c.Redundant = c, nil, true
	}
	msg, err := s.request(message.Informational, []message.Payload{{Type: message.TypeD,
		Body: message.AppendDelete(nil, message.ProtoESP, []uint32{doomed.InSPI})}}, now)
	if err != nil {
		return nil, err
	}
	s.deleting = doomed
	return msg, nil
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

// rekeyedSA makes the IKE SA that replaces s (§2.18): new SPIs, nonces
// and suite, SKEYSEED = prf(SK_d (old), g^ir (new) | Ni | Nr).
// weInitiated: we initiated the rekey, so we are the new SA's original
// initiator. The children move over later, with adopt, once it is sure
// the new SA survives (a collision may make it redundant).
func (s *SA) rekeyedSA(suite proposal.Suite, ispi, rspi uint64, ni, nr, gir []byte, weInitiated bool) (*SA, error) {
	n := &SA{cfg: s.cfg, initiator: weInitiated, local: s.local, remote: s.remote, state: StateEstablished, lastHeard: s.lastHeard, localID: s.localID, peerID: s.peerID, peerAuth: s.peerAuth, fragOK: s.fragOK,
		ispi: ispi, rspi: rspi, ikeSuite: suite, natLocal: s.natLocal, natRemote: s.natRemote}
	seed := keys.RekeySKEYSEED(s.prf, s.keys.D, gir, ni, nr)
	clear(gir)
	if err := n.deriveIKEFrom(seed, ni, nr); err != nil {
		return nil, err
	}
	return n, nil
}

// adopt moves s's children to n, the IKE SA that replaces s; s is
// retired.
func (s *SA) adopt(n *SA, now time.Time) {
	n.children = append(n.children, s.children...)
	s.children = nil
	s.handOver(n)
	s.retire(now)
}

func (s *SA) completeIKERekey(pc *pendingCreate, sas []message.Proposal, nr, gir []byte, now time.Time) ([]byte, error) {
	suite, err := proposal.CheckChoice(s.cfg.Proposals, sas, false)
	if err != nil || len(suite.SPI) != 8 || suite.DH.ID != pc.priv.Group() {
		return nil, fmt.Errorf("%w: IKE rekey: %v", ErrProtocol, proposal.ErrBadChoice)
	}
	rspi := binary.BigEndian.Uint64(suite.SPI)
	nr = append([]byte(nil), nr...)
	n, err := s.rekeyedSA(suite, pc.newSPI, rspi, pc.ni, nr, gir, true)
	if err != nil {
		return nil, err
	}
	if theirs := pc.theirsIKE; theirs != nil && lowest(pc.ni, nr, pc.theirNi, pc.ourNr) < 2 {
		// Both sides rekeyed at once and ours has the lowest nonce: it
		// is redundant (§2.8.2). We delete it at once and never use it;
		// the peer's new SA gets the children, and the peer deletes s.
		msg, err := n.request(message.Informational, []message.Payload{{Type: message.TypeD, Body: message.AppendDelete(nil, message.ProtoIKE, nil)}}, now)
		if err != nil {
			return nil, err
		}
		n.deleted()
		n.TakeEvents() // it never carried a child or was reported up
		n.wipeEnded()  // all but the SK ciphers, for its delete's answer
		s.events = append(s.events, Event{Kind: EventIKEDeleting, SA: n})
		s.adopt(theirs, now)
		return msg, nil
	}
	// Ours survives (a colliding one of the peer's is redundant, and the
	// peer deletes it): delete the old IKE SA (§2.18), gone from here on.
	if pc.theirsIKE != nil {
		pc.theirsIKE.retire(now)
	}
	s.adopt(n, now)
	s.events = append(s.events, Event{Kind: EventIKERekeyed, SA: n})
	msg, err := s.request(message.Informational, []message.Payload{{Type: message.TypeD, Body: message.AppendDelete(nil, message.ProtoIKE, nil)}}, now)
	if err != nil {
		return nil, err
	}
	s.deleted() // the delete stays outstanding: Tick retransmits it
	return msg, nil
}

// handleCreateRequest answers the peer's CREATE_CHILD_SA.
func (s *SA) handleCreateRequest(ps []message.Payload) ([]message.Payload, error) {
	sas, err := message.SA(message.Get(ps, message.TypeSA)).Proposals()
	ni := message.Get(ps, message.TypeNONC)
	if err != nil || len(ni) < 16 || len(ni) > 256 {
		return []message.Payload{notify(message.InvalidSyntax, nil)}, fmt.Errorf("%w: CREATE_CHILD_SA without SA or nonce", ErrProtocol)
	}
	ni = append([]byte(nil), ni...)
	ke := message.KE(message.Get(ps, message.TypeKE))
	rekey, isRekey := notifyOf(ps, message.RekeySA)
	isIKE := len(sas) > 0 && sas[0].Protocol == message.ProtoIKE
	if !s.retiredUntil.IsZero() {
		// A rekey replaced this IKE SA (or made it redundant): it is
		// on its way out, and neither a rekey of it nor a child goes
		// on it (§2.25.2). Its successor takes them.
		return []message.Payload{notify(message.TemporaryFailure, nil)}, fmt.Errorf("%w: the IKE SA was rekeyed", ErrBusy)
	}
	if s.create != nil || s.deleting != nil {
		// The peer rekeys what we are rekeying, the same child (§2.8.1)
		// or the IKE SA (§2.8.2): answer as usual, and settle by nonces
		// when our answer arrives. Any other overlap waits: the peer
		// retries after TEMPORARY_FAILURE (§2.25).
		pc := s.create
		sameChild := pc != nil && !pc.ike && pc.old != nil && isRekey && pc.theirs == nil &&
			len(rekey.SPI()) == 4 && binary.BigEndian.Uint32(rekey.SPI()) == pc.old.OutSPI
		bothIKE := pc != nil && pc.ike && isIKE && pc.theirsIKE == nil
		if s.deleting != nil || !sameChild && !bothIKE {
			return []message.Payload{notify(message.TemporaryFailure, nil)}, ErrBusy
		}
	}
	switch {
	case isIKE:
		return s.answerIKERekey(sas, ni, ke)
	}
	var old *Child
	if isRekey && len(rekey.SPI()) == 4 {
		want := binary.BigEndian.Uint32(rekey.SPI())
		if i := slices.IndexFunc(s.children, func(c *Child) bool { return c.OutSPI == want }); i >= 0 {
			old = s.children[i]
		}
	}
	if isRekey && old == nil {
		return []message.Payload{{Type: message.TypeN, Body: message.AppendNotify(nil, message.ProtoESP, message.ChildSANotFound, rekey.SPI(), nil)}},
			fmt.Errorf("%w: peer rekeys a child we do not have", ErrChildFailed)
	}
	if old != nil && old.rekeyed {
		// Replaced already, it waits for the peer's delete: rekeying it
		// again would only add children (§2.25.1, as for a child being
		// deleted).
		return []message.Payload{notify(message.TemporaryFailure, nil)}, fmt.Errorf("%w: peer rekeys a child it rekeyed already", ErrBusy)
	}
	if n := len(s.children); n >= s.cfg.maxChildren() {
		return []message.Payload{notify(message.TemporaryFailure, nil)},
			fmt.Errorf("%w: the IKE SA holds %d children, the most it takes", ErrChildFailed, n)
	}
	tsi, err1 := message.TS(message.Get(ps, message.TypeTSi)).Selectors()
	tsr, err2 := message.TS(message.Get(ps, message.TypeTSr)).Selectors()
	if err1 != nil || err2 != nil {
		return []message.Payload{notify(message.InvalidSyntax, nil)}, fmt.Errorf("%w: bad TSi or TSr", ErrProtocol)
	}
	// A rekey keeps its child's config; a new child gets the one its
	// selectors meet (§2.9).
	var cc *ChildConfig
	var local, remote []message.Selector
	if old != nil {
		cc = s.childConfig(old)
		local, remote = narrowTo(cc, tsi, tsr)
	} else {
		cc, local, remote = s.selectChild(tsi, tsr)
	}
	if local == nil {
		return []message.Payload{notify(message.TSUnacceptable, nil)}, fmt.Errorf("%w: %w", ErrChildFailed, ErrTSUnacceptable)
	}
	esp, err := proposal.Select(cc.Proposals, sas, false)
	if err != nil || len(esp.SPI) != 4 {
		return []message.Payload{notify(message.NoProposalChosen, nil)},
			fmt.Errorf("%w: %w: child %q: peer offered %s", ErrChildFailed, ErrNoProposalChosen, cc.Name, proposal.FormatList(sas))
	}
	var priv *dh.Private
	defer func() { priv.Clear() }() // after the answer took its public value
	var gir []byte
	if esp.DH.Name != "" {
		if !ke.IsValid() || ke.Group() != esp.DH.ID {
			return []message.Payload{notify(message.InvalidKEPayload, binary.BigEndian.AppendUint16(nil, esp.DH.ID))},
				fmt.Errorf("%w: %w: want group %d", ErrChildFailed, ErrInvalidKE, esp.DH.ID)
		}
		if priv, err = dh.New(esp.DH.ID, s.cfg.rand()); err == nil {
			gir, err = priv.Shared(ke.Data())
		}
		if err != nil {
			return []message.Payload{notify(message.InvalidSyntax, nil)}, fmt.Errorf("%w: %v", ErrProtocol, err)
		}
	}
	inSPI, err := s.cfg.newSPI()
	if err != nil {
		return []message.Payload{notify(message.TemporaryFailure, nil)}, err
	}
	nr, err := s.cfg.randomBytes(nonceLen)
	if err != nil {
		return []message.Payload{notify(message.TemporaryFailure, nil)}, err
	}
	outSPI := binary.BigEndian.Uint32(esp.SPI)
	esp.SPI = binary.BigEndian.AppendUint32(nil, inSPI)
	transport := cc.Transport
	if old != nil {
		transport = old.Transport
	} else {
		_, asked := notifyOf(ps, message.UseTransportMode)
		transport = transport && asked
	}
	c := s.newChild(cc, esp, inSPI, outSPI, local, remote, transport, gir, ni, nr, false)
	clear(gir)
	c.Replaces = old
	if old != nil {
		old.rekeyed = true
	}
	s.children = append(s.children, c)
	s.events = append(s.events, Event{Kind: EventChildUp, Child: c})
	if s.create != nil {
		s.create.theirs, s.create.theirNi, s.create.ourNr = c, ni, nr
	}
	var reply []message.Payload
	if c.Transport {
		reply = append(reply, notify(message.UseTransportMode, nil))
	}
	reply = append(reply,
		message.Payload{Type: message.TypeSA, Body: message.AppendSA(nil, []message.Proposal{esp.Proposal()})},
		message.Payload{Type: message.TypeNONC, Body: nr})
	if priv != nil {
		reply = append(reply, message.Payload{Type: message.TypeKE, Body: message.AppendKE(nil, priv.Group(), priv.Public())})
	}
	return append(reply,
		message.Payload{Type: message.TypeTSi, Body: message.AppendTS(nil, remote)},
		message.Payload{Type: message.TypeTSr, Body: message.AppendTS(nil, local)}), nil
}

// answerIKERekey is the responder's side of an IKE SA rekey.
func (s *SA) answerIKERekey(sas []message.Proposal, ni []byte, ke message.KE) ([]message.Payload, error) {
	suite, err := proposal.Select(s.cfg.Proposals, sas, false)
	if err != nil || len(suite.SPI) != 8 {
		return []message.Payload{notify(message.NoProposalChosen, nil)}, fmt.Errorf("%w: IKE rekey: peer offered %s", ErrNoProposalChosen, proposal.FormatList(sas))
	}
	if !ke.IsValid() || ke.Group() != suite.DH.ID {
		return []message.Payload{notify(message.InvalidKEPayload, binary.BigEndian.AppendUint16(nil, suite.DH.ID))}, fmt.Errorf("%w: IKE rekey: want group %d", ErrInvalidKE, suite.DH.ID)
	}
	priv, err := dh.New(suite.DH.ID, s.cfg.rand())
	if err != nil {
		return []message.Payload{notify(message.TemporaryFailure, nil)}, err
	}
	defer priv.Clear() // after the answer took its public value
	gir, err := priv.Shared(ke.Data())
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
	n, err := s.rekeyedSA(suite, ispi, rspi, ni, nr, gir, false)
	if err != nil {
		return []message.Payload{notify(message.TemporaryFailure, nil)}, err
	}
	// The daemon routes the new SPIs to n from now on. The children move
	// to it now, unless our own rekey collides: then the nonces decide
	// when our answer arrives.
	s.events = append(s.events, Event{Kind: EventIKERekeyed, SA: n})
	if pc := s.create; pc != nil {
		pc.theirsIKE, pc.theirNi, pc.ourNr = n, ni, nr
	} else {
		s.adopt(n, s.now)
	}
	return []message.Payload{
		{Type: message.TypeSA, Body: message.AppendSA(nil, []message.Proposal{suite.Proposal()})},
		{Type: message.TypeNONC, Body: nr},
		{Type: message.TypeKE, Body: message.AppendKE(nil, priv.Group(), priv.Public())},
	}, nil
}

// transport reports whether the child asks for transport mode: as the
// child it rekeys, or as configured.
func (pc *pendingCreate) transport() bool {
	if pc.old != nil {
		return pc.old.Transport
	}
	return pc.cfg.Transport
}

// selectors are the TSi and TSr to send: the rekeyed child's, or the
// configured ones.
func (pc *pendingCreate) selectors(s *SA) (local, remote []message.Selector) {
	if pc.old != nil {
		return pc.old.LocalTS, pc.old.RemoteTS
	}
	return prefixSelectors(pc.cfg.LocalTS), prefixSelectors(pc.cfg.RemoteTS)
}

// CreateChild starts a CREATE_CHILD_SA that brings up the connection's
// child named name ("": Config.Child) under the IKE SA (§1.3.1): a
// further child, or one that was deleted or refused. EventChildUp
// reports it. Whether that child is up already is the caller's
// business (a peer may hold two of one config, as strongSwan does).
// While a request of ours is outstanding, or the IKE SA is not up yet,
// the creation waits in the queue and CreateChild returns no
// request (see Next).
func (s *SA) CreateChild(name string, now time.Time) ([]byte, error) {
	cc := &s.cfg.Child
	if name != "" {
		if cc = s.cfg.ChildConfig(name); cc == nil {
			return nil, fmt.Errorf("ike: the connection has no child %q", name)
		}
	}
	if s.state == StateInitSent || s.state == StateAuthSent || s.state == StateInitDone {
		s.enqueue(work{op: workCreateChild, name: name})
		return nil, nil
	}
	if s.state != StateEstablished {
		return nil, ErrNotEstablished
	}
	if !s.retiredUntil.IsZero() {
		return nil, ErrRekeyed
	}
	if s.pending != nil {
		s.enqueue(work{op: workCreateChild, name: name})
		return nil, nil
	}
	pc := &pendingCreate{cfg: cc}
	var err error
	if pc.inSPI, err = s.cfg.newSPI(); err != nil {
		return nil, err
	}
	if groups := cc.Proposals[0].Groups(); len(groups) > 0 {
		if pc.priv, err = dh.New(groups[0], s.cfg.rand()); err != nil {
			return nil, err
		}
	}
	return s.sendCreate(pc, now)
}
