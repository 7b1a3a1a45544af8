package ike

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/ipsecd/ipsecd/ike/dh"
	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/ike/proposal"
)

// CREATE_CHILD_SA for a further child of the connection under the IKE SA
// (RFC 7296 §1.3.1): any of its children, the one whose selectors the
// peer's offer meets (selectChild), up to Config.MaxChildren. A child's
// rekey (child_rekey.go) is the same exchange with REKEY_SA and the old
// child's selectors.

// childCreate is our CREATE_CHILD_SA that makes a child of cfg.
type childCreate struct {
	cfg *ChildConfig
	// transport and the selectors (TSi, TSr) are what we ask for: the
	// config's, or the child's a rekey replaces.
	transport     bool
	local, remote []message.Selector
	inSPI         uint32 // our new inbound SPI
	ni            []byte
	priv          *dh.Private // nil without PFS
	// followup runs the additional key exchanges the answer chose
	// (errFollowup), and child makes the child from all the secrets.
	followup *followupKE
	child    func(gir, added []byte) *Child
}

// newChildCreate allocates the inbound SPI and, when cc's first
// proposal names a group, the key exchange of a child of cc.
func newChildCreate(s *SA, cc *ChildConfig) (*childCreate, error) {
	x := &childCreate{cfg: cc, transport: cc.Transport, local: prefixSelectors(cc.LocalTS), remote: prefixSelectors(cc.RemoteTS)}
	var err error
	if x.inSPI, err = s.cfg.newSPI(); err != nil {
		return nil, err
	}
	if groups := cc.Proposals[0].Groups(); len(groups) > 0 {
		if x.priv, err = dh.New(groups[0], s.cfg.rand()); err != nil {
			s.unusedSPI(x.inSPI)
			return nil, err
		}
	}
	return x, nil
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
	return s.startOrQueue(work{op: workCreateChild, name: name}, func() (task, error) { return newChildCreate(s, cc) }, now)
}

func (x *childCreate) request(s *SA) (message.ExchangeType, []message.Payload, error) {
	ps, err := x.payloads(s)
	return message.CreateChildSA, ps, err
}

// payloads are the request's [N(USE_TRANSPORT_MODE)] SA Ni [KEi] TSi
// TSr, with a fresh nonce.
func (x *childCreate) payloads(s *SA) ([]message.Payload, error) {
	var err error
	if x.ni, err = s.cfg.randomBytes(nonceLen); err != nil {
		return nil, err
	}
	var ps []message.Payload
	if x.transport {
		ps = append(ps, notify(message.UseTransportMode, nil))
	}
	ps = append(ps,
		message.Payload{Type: message.TypeSA, Body: message.AppendSA(nil, proposal.MessagesMultiKE(x.cfg.Proposals, binary.BigEndian.AppendUint32(nil, x.inSPI)))},
		message.Payload{Type: message.TypeNONC, Body: x.ni})
	if x.priv != nil {
		ps = append(ps, message.Payload{Type: message.TypeKE, Body: message.AppendKE(nil, x.priv.Group(), x.priv.Public())})
	}
	return append(ps,
		message.Payload{Type: message.TypeTSi, Body: message.AppendTS(nil, x.local)},
		message.Payload{Type: message.TypeTSr, Body: message.AppendTS(nil, x.remote)}), nil
}

func (x *childCreate) drop(s *SA) {
	x.priv.Clear()
	s.unusedSPI(x.inSPI)
}

func (x *childCreate) response(s *SA, ps []message.Payload, now time.Time) ([]byte, error) {
	c, err := x.made(s, ps)
	if errors.Is(err, errNewGroup) {
		return s.start(x, now)
	}
	if errors.Is(err, errFollowup) {
		x.followup.of = x
		x.followup.done = func(s *SA, gir, added []byte, now time.Time) ([]byte, error) {
			s.addChild(x.child(gir, added), false)
			return nil, nil
		}
		return s.start(x.followup, now)
	}
	if err != nil {
		s.unusedSPI(x.inSPI)
		return nil, err
	}
	s.addChild(c, false)
	return nil, nil
}

// errNewGroup: the peer asked for another group of those we offered
// (INVALID_KE_PAYLOAD); the task starts again with a key of it (§1.3).
var errNewGroup = errors.New("ike: peer asked for another group")

// newGroup handles an INVALID_KE_PAYLOAD answer to our request with the
// key exchange *priv, of offered: errNewGroup with *priv a key of the
// group asked for, or an error when it names one we did not offer or
// the one we sent. nil when the answer is no INVALID_KE_PAYLOAD.
func newGroup(s *SA, ps []message.Payload, priv **dh.Private, offered []proposal.Proposal) error {
	n, ok := notifyOf(ps, message.InvalidKEPayload)
	if !ok || *priv == nil || len(n.Data()) != 2 {
		return nil
	}
	g := binary.BigEndian.Uint16(n.Data())
	if g == (*priv).Group() || !offersGroup(offered, g) {
		return fmt.Errorf("%w: %d", ErrInvalidKE, g)
	}
	p, err := dh.New(g, s.cfg.rand())
	if err != nil {
		return err
	}
	(*priv).Clear()
	*priv = p
	return errNewGroup
}

// made completes the child from the peer's answer to our request; the
// exchange's private key is cleared, whatever comes of it.
func (x *childCreate) made(s *SA, ps []message.Payload) (*Child, error) {
	sas, nr, err := createAnswer(s, ps, &x.priv, x.cfg.Proposals)
	if errors.Is(err, errNewGroup) {
		return nil, err
	}
	defer x.priv.Clear()
	if err != nil {
		return nil, err
	}
	// A child's PFS is the chosen proposal's: offered our KE, the
	// responder may still choose one of our proposals without a group,
	// and then answers without KE (RFC 7296 §1.3.1, §3.4).
	esp, err := proposal.CheckChoice(x.cfg.Proposals, sas, true)
	if x.priv != nil {
		esp, err = proposal.CheckChoiceMultiKE(x.cfg.Proposals, sas)
	}
	if err != nil || len(esp.SPI) != 4 || esp.DH.Name != "" && esp.DH.ID != x.priv.Group() {
		return nil, fmt.Errorf("%w: %v", ErrChildFailed, proposal.ErrBadChoice)
	}
	var gir []byte
	if esp.DH.Name != "" {
		if gir, err = sharedOf(ps, x.priv); err != nil {
			return nil, err
		}
	}
	defer clear(gir)
	tsi, err1 := message.TS(message.Get(ps, message.TypeTSi)).Selectors()
	tsr, err2 := message.TS(message.Get(ps, message.TypeTSr)).Selectors()
	if err1 != nil || err2 != nil || !within(tsi, x.local) || !within(tsr, x.remote) {
		return nil, fmt.Errorf("%w: %w: the answer widened the selectors", ErrChildFailed, ErrTSUnacceptable)
	}
	outSPI := binary.BigEndian.Uint32(esp.SPI)
	esp.SPI = binary.BigEndian.AppendUint32(nil, x.inSPI)
	_, transport := notifyOf(ps, message.UseTransportMode)
	if methods := esp.AddKEs(); len(methods) > 0 {
		// The child comes of all the exchanges, after IKE_FOLLOWUP_KE.
		link, ok := addKELink(ps)
		if !ok {
			return nil, fmt.Errorf("%w: CREATE_CHILD_SA chose additional key exchanges without N(ADDITIONAL_KEY_EXCHANGE)", ErrProtocol)
		}
		nr = append([]byte(nil), nr...)
		x.followup = &followupKE{methods: methods, link: link, gir: append([]byte(nil), gir...)}
		x.child = func(gir, added []byte) *Child {
			return s.newChild(x.cfg, esp, x.inSPI, outSPI, tsi, tsr, transport && x.transport, gir, x.ni, nr, true, added)
		}
		return nil, errFollowup
	}
	return s.newChild(x.cfg, esp, x.inSPI, outSPI, tsi, tsr, transport && x.transport, gir, x.ni, nr, true), nil
}

// createAnswer returns the proposal chosen and the nonce of the peer's
// answer to our CREATE_CHILD_SA, which offered offered with the key
// exchange *priv, or the error its notify, or their lack, says:
// errNewGroup (newGroup) starts the task again with *priv in the group
// the peer asked for.
func createAnswer(s *SA, ps []message.Payload, priv **dh.Private, offered []proposal.Proposal) ([]message.Proposal, []byte, error) {
	if err := newGroup(s, ps, priv, offered); err != nil {
		return nil, nil, err
	}
	if t, ok := firstError(ps); ok {
		return nil, nil, fmt.Errorf("%w: CREATE_CHILD_SA answered with notify %d", childRefused(t), t)
	}
	sas, err := message.SA(message.Get(ps, message.TypeSA)).Proposals()
	nr := message.Get(ps, message.TypeNONC)
	if err != nil || !nonceOK(nr) {
		return nil, nil, fmt.Errorf("%w: CREATE_CHILD_SA response without SA or nonce", ErrProtocol)
	}
	return sas, nr, nil
}

// nonceOK reports whether n is a nonce of a length RFC 7296 §2.10 allows.
func nonceOK(n []byte) bool { return len(n) >= 16 && len(n) <= 256 }

// sharedOf returns g^ir of priv and the peer's KE among ps, which must be
// of priv's group.
func sharedOf(ps []message.Payload, priv *dh.Private) ([]byte, error) {
	ke := message.KE(message.Get(ps, message.TypeKE))
	if !ke.IsValid() || ke.Group() != priv.Group() {
		return nil, fmt.Errorf("%w: CREATE_CHILD_SA response without our group's KE", ErrProtocol)
	}
	gir, err := priv.Shared(ke.Data())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	return gir, nil
}

// addChild makes c one of the SA's children and reports it: to be
// installed whole, or its inbound SA alone (EventChildUp's InboundOnly).
func (s *SA) addChild(c *Child, inboundOnly bool) {
	c.outboundWaits = inboundOnly
	s.children = append(s.children, c)
	s.events = append(s.events, Event{Kind: EventChildUp, Child: c, InboundOnly: inboundOnly})
}

// unusedSPI reports spi, an inbound SPI of ours that no child will use.
func (s *SA) unusedSPI(spi uint32) {
	if spi != 0 {
		s.events = append(s.events, Event{Kind: EventSPIUnused, SPI: spi})
	}
}

// answerChild answers the peer's CREATE_CHILD_SA that makes a child, a
// new one (old nil) or one that replaces old, and passes the child made,
// with the exchange's nonces, to then: at once, or, when additional key
// exchanges were chosen, once the peer's IKE_FOLLOWUP_KE exchanges ran
// them (followup.go).
func (s *SA) answerChild(req *createRequest, old *Child, then func(*crossing)) ([]message.Payload, error) {
	reply, made, err := s.answerChildOf(req, old, then)
	if made != nil {
		then(made)
	}
	return reply, err
}

func (s *SA) answerChildOf(req *createRequest, old *Child, then func(*crossing)) ([]message.Payload, *crossing, error) {
	if n := len(s.children); n >= s.cfg.maxChildren() {
		return []message.Payload{notify(message.TemporaryFailure, nil)}, nil,
			fmt.Errorf("%w: the IKE SA holds %d children, the most it takes", ErrChildFailed, n)
	}
	tsi, err1 := message.TS(message.Get(req.ps, message.TypeTSi)).Selectors()
	tsr, err2 := message.TS(message.Get(req.ps, message.TypeTSr)).Selectors()
	if err1 != nil || err2 != nil {
		return []message.Payload{notify(message.InvalidSyntax, nil)}, nil, fmt.Errorf("%w: bad TSi or TSr", ErrProtocol)
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
		return []message.Payload{notify(message.TSUnacceptable, nil)}, nil, fmt.Errorf("%w: %w", ErrChildFailed, ErrTSUnacceptable)
	}
	esp, err := proposal.SelectMultiKE(cc.Proposals, req.sas)
	if err != nil || len(esp.SPI) != 4 || len(esp.AddKEs()) > 0 && esp.DH.Name == "" {
		return []message.Payload{notify(message.NoProposalChosen, nil)}, nil,
			fmt.Errorf("%w: %w: child %q: peer offered %s", ErrChildFailed, ErrNoProposalChosen, cc.Name, proposal.FormatList(req.sas))
	}
	var priv *dh.Private
	defer func() { priv.Clear() }() // after the answer took its public value
	var gir []byte
	if esp.DH.Name != "" {
		if !req.ke.IsValid() || req.ke.Group() != esp.DH.ID {
			return []message.Payload{notify(message.InvalidKEPayload, binary.BigEndian.AppendUint16(nil, esp.DH.ID))}, nil,
				fmt.Errorf("%w: %w: want group %d", ErrChildFailed, ErrInvalidKE, esp.DH.ID)
		}
		if priv, err = dh.New(esp.DH.ID, s.cfg.rand()); err == nil {
			gir, err = priv.Shared(req.ke.Data())
		}
		if err != nil {
			return []message.Payload{notify(message.InvalidSyntax, nil)}, nil, fmt.Errorf("%w: %v", ErrProtocol, err)
		}
	}
	defer clear(gir)
	inSPI, err := s.cfg.newSPI()
	if err != nil {
		return []message.Payload{notify(message.TemporaryFailure, nil)}, nil, err
	}
	nr, err := s.cfg.randomBytes(nonceLen)
	if err != nil {
		s.unusedSPI(inSPI)
		return []message.Payload{notify(message.TemporaryFailure, nil)}, nil, err
	}
	outSPI := binary.BigEndian.Uint32(esp.SPI)
	esp.SPI = binary.BigEndian.AppendUint32(nil, inSPI)
	transport := cc.Transport
	if old != nil {
		transport = old.Transport
	} else {
		_, asked := notifyOf(req.ps, message.UseTransportMode)
		transport = transport && asked
	}
	var reply []message.Payload
	if transport {
		reply = append(reply, notify(message.UseTransportMode, nil))
	}
	reply = append(reply,
		message.Payload{Type: message.TypeSA, Body: message.AppendSA(nil, []message.Proposal{esp.Proposal()})},
		message.Payload{Type: message.TypeNONC, Body: nr})
	if priv != nil {
		reply = append(reply, message.Payload{Type: message.TypeKE, Body: message.AppendKE(nil, priv.Group(), priv.Public())})
	}
	reply = append(reply,
		message.Payload{Type: message.TypeTSi, Body: message.AppendTS(nil, remote)},
		message.Payload{Type: message.TypeTSr, Body: message.AppendTS(nil, local)})
	if methods := esp.AddKEs(); len(methods) > 0 {
		// The child comes of all the exchanges, after the peer's
		// IKE_FOLLOWUP_KE.
		ni := req.ni
		n, err := s.awaitFollowup(methods, gir, func(s *SA, gir, added []byte) error {
			then(&crossing{child: s.newChild(cc, esp, inSPI, outSPI, local, remote, transport, gir, ni, nr, false, added), ni: ni, nr: nr})
			return nil
		})
		if err != nil {
			return []message.Payload{notify(message.TemporaryFailure, nil)}, nil, err
		}
		return append(reply, n), nil, nil
	}
	c := s.newChild(cc, esp, inSPI, outSPI, local, remote, transport, gir, req.ni, nr, false)
	return reply, &crossing{child: c, ni: req.ni, nr: nr}, nil
}
