package ike

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/ipsecd/ipsecd/ike/dh"
	"github.com/ipsecd/ipsecd/ike/keys"
	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/ike/proposal"
)

// nonceLen is the size of our nonces: 32 bytes, at least half the key
// size of every PRF offered (RFC 7296 §2.10).
const nonceLen = 32

// Initiate starts an IKE SA towards remote from local and returns it with
// the IKE_SA_INIT request to send. The key exchange is in the first
// group of the first proposal; the responder may ask for another one.
func Initiate(cfg *Config, local, remote netip.AddrPort, now time.Time) (*SA, []byte, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	s := &SA{cfg: cfg, initiator: true, local: local, remote: remote, state: StateInitSent, lastHeard: now, localID: cfg.localIdentity(),
		hs: &handshake{}}
	spi, err := cfg.randomBytes(8)
	if err != nil {
		return nil, nil, err
	}
	s.ispi = binary.BigEndian.Uint64(spi) | 1 // never zero
	if s.hs.ni, err = cfg.randomBytes(nonceLen); err != nil {
		return nil, nil, err
	}
	if err := s.newKE(cfg.Proposals[0].Groups()[0]); err != nil {
		return nil, nil, err
	}
	msg := s.initRequest()
	s.nextID = 1
	return s, s.startRequest(msg, message.IKESAInit, now), nil
}

func (s *SA) newKE(group uint16) error {
	s.hs.priv.Clear() // the group the responder did not want
	p, err := dh.New(group, s.cfg.rand())
	s.hs.priv = p
	return err
}

// natNotifies returns NAT_DETECTION_SOURCE_IP and _DESTINATION_IP for a
// message from local to remote.
func (s *SA) natNotifies() []message.Payload {
	src := natHash(s.ispi, s.rspi, s.local)
	if s.cfg.ForceEncap {
		// A hash that matches nothing: the peer sees a NAT in front of
		// us and both sides encapsulate, as strongSwan's encap = yes.
		src, _ = s.cfg.randomBytes(len(src))
	}
	return []message.Payload{
		notify(message.NATDetectionSourceIP, src),
		notify(message.NATDetectionDestinationIP, natHash(s.ispi, s.rspi, s.remote)),
	}
}

func (s *SA) initRequest() []byte {
	var ps []message.Payload
	if s.hs.cookie != nil {
		ps = append(ps, notify(message.Cookie, s.hs.cookie))
	}
	ps = append(ps,
		message.Payload{Type: message.TypeSA, Body: message.AppendSA(nil, proposal.MessagesMultiKE(s.cfg.Proposals, nil))},
		message.Payload{Type: message.TypeKE, Body: message.AppendKE(nil, s.hs.priv.Group(), s.hs.priv.Public())},
		message.Payload{Type: message.TypeNONC, Body: s.hs.ni},
	)
	ps = append(ps, s.natNotifies()...)
	if s.cfg.usesPubkey() && !s.cfg.ClassicSignatures {
		ps = append(ps, notify(message.SignatureHashAlgorithms, hashAlgs()))
	}
	if !s.cfg.DisableFragmentation {
		ps = append(ps, notify(message.FragmentationSupported, nil))
	}
	if offersAddKE(s.cfg.Proposals) {
		ps = append(ps, notify(message.IntermediateExchangeSupported, nil))
	}
	s.hs.initReq = message.Encode(&message.Message{HeaderFields: s.header(message.IKESAInit, 0, false), Payloads: ps})
	return s.hs.initReq
}

// offersAddKE reports whether one of ps has an additional key exchange
// (RFC 9370), which IKE_INTERMEDIATE runs.
func offersAddKE(ps []proposal.Proposal) bool {
	return slices.ContainsFunc(ps, proposal.Proposal.HasAddKE)
}

// offersGroup reports whether one of ps offers group g.
func offersGroup(ps []proposal.Proposal, g uint16) bool {
	for _, p := range ps {
		if slices.Contains(p.Groups(), g) {
			return true
		}
	}
	return false
}

func (s *SA) handleInitResponse(m *message.Message, raw []byte, now time.Time) ([]byte, error) {
	if n, ok := notifyOf(m.Payloads, message.Cookie); ok && len(n.Data()) > 0 && len(n.Data()) <= 64 {
		s.hs.cookie = append([]byte(nil), n.Data()...)
		return s.startRequest(s.initRequest(), message.IKESAInit, now), nil
	}
	if n, ok := notifyOf(m.Payloads, message.InvalidKEPayload); ok {
		d := n.Data()
		if len(d) != 2 {
			return nil, dropped("INVALID_KE_PAYLOAD without a group")
		}
		g := binary.BigEndian.Uint16(d)
		if g == s.hs.priv.Group() || !offersGroup(s.cfg.Proposals, g) {
			return nil, s.fail(fmt.Errorf("%w: %d", ErrInvalidKE, g))
		}
		// Retry in the group the responder wants (RFC 7296 §1.2).
		if err := s.newKE(g); err != nil {
			return nil, s.fail(err)
		}
		return s.startRequest(s.initRequest(), message.IKESAInit, now), nil
	}
	if t, ok := firstError(m.Payloads); ok {
		if t == message.NoProposalChosen {
			return nil, s.fail(fmt.Errorf("%w: responder accepted none of %s", ErrNoProposalChosen, proposal.FormatList(proposal.MessagesMultiKE(s.cfg.Proposals, nil))))
		}
		return nil, s.fail(fmt.Errorf("%w: IKE_SA_INIT answered with error notify %d", ErrProtocol, t))
	}
	if m.RSPI == 0 {
		return nil, dropped("IKE_SA_INIT response without a responder SPI")
	}
	sas, err := message.SA(m.Get(message.TypeSA)).Proposals()
	if err != nil {
		return nil, dropped("%v", err)
	}
	suite, err := proposal.CheckChoiceMultiKE(s.cfg.Proposals, sas)
	if err != nil {
		return nil, s.fail(fmt.Errorf("%w: %v: %s", ErrProtocol, err, proposal.FormatList(sas)))
	}
	if _, ok := notifyOf(m.Payloads, message.IntermediateExchangeSupported); len(suite.AddKEs()) > 0 && !ok {
		return nil, s.fail(fmt.Errorf("%w: the responder chose additional key exchanges (%s) without announcing IKE_INTERMEDIATE", ErrProtocol, suite))
	}
	ke := message.KE(m.Get(message.TypeKE))
	nr := m.Get(message.TypeNONC)
	if !ke.IsValid() || ke.Group() != s.hs.priv.Group() || suite.DH.ID != s.hs.priv.Group() || len(nr) < 16 || len(nr) > 256 {
		return nil, dropped("IKE_SA_INIT response: bad KE or nonce")
	}
	gir, err := s.hs.priv.Shared(ke.Data())
	if err != nil {
		return nil, dropped("%v", err)
	}
	s.rspi = m.RSPI
	s.hs.nr = append([]byte(nil), nr...)
	s.hs.initResp = append([]byte(nil), raw...)
	s.ikeSuite = suite
	s.hs.addKEs = suite.AddKEs()
	s.detectNAT(m.Payloads)
	s.peerInitNotifies(m.Payloads)
	if err := s.deriveIKE(gir); err != nil {
		return nil, s.fail(err)
	}
	s.pending = nil
	s.state = StateAuthSent
	if s.NAT() {
		// The initiator moves to port 4500 for IKE_AUTH (§2.23).
		s.local = netip.AddrPortFrom(s.local.Addr(), NATTPort)
		s.remote = netip.AddrPortFrom(s.remote.Addr(), NATTPort)
	}
	if s.intermediatePending() {
		msg, err := s.intermediateRequest(now)
		if err != nil {
			return nil, s.fail(err)
		}
		return msg, nil
	}
	msg, err := s.authRequest(now)
	if err != nil {
		return nil, s.fail(err)
	}
	return msg, nil
}

// peerInitNotifies records what the peer's IKE_SA_INIT message says for
// IKE_AUTH: the hashes it verifies signatures with (RFC 7427 §4) and the
// CAs it trusts (CERTREQ, sent by a responder here).
func (s *SA) peerInitNotifies(ps []message.Payload) {
	if n, ok := notifyOf(ps, message.SignatureHashAlgorithms); ok {
		s.hs.peerHashes = parseHashAlgs(n.Data())
	}
	s.hs.peerCertReq = parseCertReqs(ps)
	_, frag := notifyOf(ps, message.FragmentationSupported)
	s.fragOK = frag && !s.cfg.DisableFragmentation
}

// detectNAT compares the peer's NAT detection hashes with the addresses
// we see (RFC 7296 §2.23). Without the notifies no NAT is assumed.
func (s *SA) detectNAT(ps []message.Payload) {
	var srcMatch, seen bool
	for _, n := range message.Notifies(ps) {
		if !n.IsValid() {
			continue
		}
		switch n.Type() {
		case message.NATDetectionSourceIP:
			seen = true
			if subtle.ConstantTimeCompare(n.Data(), natHash(s.ispi, s.rspi, s.remote)) == 1 {
				srcMatch = true
			}
		case message.NATDetectionDestinationIP:
			if subtle.ConstantTimeCompare(n.Data(), natHash(s.ispi, s.rspi, s.local)) != 1 {
				s.natLocal = true
			}
		}
	}
	s.natRemote = seen && !srcMatch
	if s.cfg.ForceEncap {
		s.natLocal = true
	}
}

// deriveIKE computes SKEYSEED and the IKE SA keys, and the SK ciphers of
// both directions, from the handshake's nonces and g^ir; the DH private
// key has done its work then and is cleared.
func (s *SA) deriveIKE(gir []byte) error {
	defer clear(gir)
	s.prf = keys.NewPRF(s.ikeSuite.PRF)
	seed := keys.SKEYSEED(s.prf, s.hs.ni, s.hs.nr, gir)
	s.hs.clear()
	return s.deriveIKEFrom(seed, s.hs.ni, s.hs.nr)
}

// deriveIKEFrom derives the keys and ciphers from SKEYSEED and the
// nonces ni and nr, and wipes SKEYSEED afterwards.
func (s *SA) deriveIKEFrom(seed, ni, nr []byte) error {
	defer clear(seed)
	s.prf = keys.NewPRF(s.ikeSuite.PRF)
	s.keys = keys.DeriveIKE(s.ikeSuite, seed, ni, nr, s.ispi, s.rspi)
	ei, err := keys.NewSKCipher(s.ikeSuite, s.keys.EI, s.keys.AI)
	if err != nil {
		return err
	}
	er, err := keys.NewSKCipher(s.ikeSuite, s.keys.ER, s.keys.AR)
	if err != nil {
		return err
	}
	s.seal, s.open = ei, er
	if !s.initiator {
		s.seal, s.open = er, ei
	}
	return nil
}

// Respond handles an IKE_SA_INIT request that arrived at local from
// remote. It returns the new SA (nil when the request was refused) and the
// answer to send: the IKE_SA_INIT response, or a notify refusing it
// (NO_PROPOSAL_CHOSEN, INVALID_KE_PAYLOAD, UNSUPPORTED_CRITICAL_PAYLOAD).
// A request that does not parse gives neither, and an error wrapping
// ErrDropped.
func Respond(cfg *Config, local, remote netip.AddrPort, raw []byte, now time.Time) (*SA, []byte, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	m, err := message.Parse(raw)
	var ce *message.CriticalError
	if errors.As(err, &ce) {
		// Only an IKE_SA_INIT request gets an answer (§2.5); anything
		// else without an SA is dropped.
		if h := message.Header(raw).Fields(); h.Exchange == message.IKESAInit && !h.IsResponse() && h.MessageID == 0 && h.RSPI == 0 {
			return nil, refusal(h, notify(message.UnsupportedCriticalPayload, []byte{byte(ce.Type)})), fmt.Errorf("%w: %v", ErrDropped, err)
		}
	}
	if err != nil {
		return nil, nil, dropped("%v", err)
	}
	if m.Exchange != message.IKESAInit || m.IsResponse() || m.Flags&message.FlagInitiator == 0 || m.MessageID != 0 || m.RSPI != 0 || m.ISPI == 0 {
		return nil, nil, dropped("not an IKE_SA_INIT request")
	}
	sas, err := message.SA(m.Get(message.TypeSA)).Proposals()
	ke := message.KE(m.Get(message.TypeKE))
	ni := m.Get(message.TypeNONC)
	if err != nil || !ke.IsValid() || len(ni) < 16 || len(ni) > 256 {
		return nil, refusal(m.HeaderFields, notify(message.InvalidSyntax, nil)), dropped("IKE_SA_INIT request: bad SA, KE or nonce")
	}
	// Additional key exchanges (RFC 9370) only with a peer that can run
	// IKE_INTERMEDIATE (§2.2.1).
	_, intermediate := notifyOf(m.Payloads, message.IntermediateExchangeSupported)
	choose := func(sas []message.Proposal) (proposal.Suite, error) {
		if intermediate {
			return proposal.SelectMultiKE(cfg.Proposals, sas)
		}
		return proposal.Select(cfg.Proposals, sas, false)
	}
	suite, err := choose(sas)
	if err == nil && ke.Group() != suite.DH.ID {
		// Prefer any acceptable proposal in the group the KE already
		// has over a round trip for INVALID_KE_PAYLOAD.
		if s, err := choose(onlyGroup(sas, ke.Group())); err == nil {
			suite = s
		}
	}
	if err != nil {
		return nil, refusal(m.HeaderFields, notify(message.NoProposalChosen, nil)),
			fmt.Errorf("%w: peer offered %s; we accept %s", ErrNoProposalChosen, proposal.FormatList(sas), proposal.FormatList(proposal.MessagesMultiKE(cfg.Proposals, nil)))
	}
	if ke.Group() != suite.DH.ID {
		return nil, refusal(m.HeaderFields, notify(message.InvalidKEPayload, binary.BigEndian.AppendUint16(nil, suite.DH.ID))),
			fmt.Errorf("%w: KE in group %d, asked for %d", ErrDropped, ke.Group(), suite.DH.ID)
	}
	s := &SA{cfg: cfg, local: local, remote: remote, state: StateInitDone, ispi: m.ISPI, ikeSuite: suite,
		lastHeard: now, localID: cfg.localIdentity(), hs: &handshake{halfOpenUntil: now.Add(HalfOpenTimeout), addKEs: suite.AddKEs()}}
	s.detectNAT(m.Payloads) // the request's hashes cover a zero SPIr
	s.peerInitNotifies(m.Payloads)
	spi, err := cfg.randomBytes(8)
	if err != nil {
		return nil, nil, err
	}
	s.rspi = binary.BigEndian.Uint64(spi) | 1
	if s.hs.nr, err = cfg.randomBytes(nonceLen); err != nil {
		return nil, nil, err
	}
	if err := s.newKE(suite.DH.ID); err != nil {
		return nil, nil, err
	}
	gir, err := s.hs.priv.Shared(ke.Data())
	if err != nil {
		s.hs.priv.Clear()
		return nil, refusal(m.HeaderFields, notify(message.InvalidSyntax, nil)), dropped("%v", err)
	}
	s.hs.ni = append([]byte(nil), ni...)
	s.hs.initReq = append([]byte(nil), raw...)
	suite.SPI = nil
	ps := []message.Payload{
		{Type: message.TypeSA, Body: message.AppendSA(nil, []message.Proposal{suite.Proposal()})},
		{Type: message.TypeKE, Body: message.AppendKE(nil, s.hs.priv.Group(), s.hs.priv.Public())},
		{Type: message.TypeNONC, Body: s.hs.nr},
	}
	if cfg.remoteAuth() == AuthPubkey {
		ps = append(ps, cfg.certReq())
	}
	ps = append(ps, s.natNotifies()...)
	if cfg.usesPubkey() && !cfg.ClassicSignatures {
		ps = append(ps, notify(message.SignatureHashAlgorithms, hashAlgs()))
	}
	if s.fragOK {
		ps = append(ps, notify(message.FragmentationSupported, nil))
	}
	if intermediate {
		ps = append(ps, notify(message.IntermediateExchangeSupported, nil))
	}
	s.hs.initResp = message.Encode(&message.Message{HeaderFields: s.header(message.IKESAInit, 0, true), Payloads: ps})
	if err := s.deriveIKE(gir); err != nil {
		return nil, nil, err
	}
	s.peerNextID, s.lastResp, s.lastReq = 1, s.hs.initResp, sha256.Sum256(raw)
	return s, s.hs.initResp, nil
}

// refusal is an unencrypted IKE_SA_INIT response carrying one notify, with
// no responder SPI: no state is kept for the request.
func refusal(req message.HeaderFields, n message.Payload) []byte {
	h := message.HeaderFields{ISPI: req.ISPI, Exchange: message.IKESAInit, Flags: message.FlagResponse, MessageID: req.MessageID}
	return message.Encode(&message.Message{HeaderFields: h, Payloads: []message.Payload{n}})
}

// onlyGroup returns the proposals ps with their key exchange transforms
// cut down to group g (proposals without it are dropped).
func onlyGroup(ps []message.Proposal, g uint16) []message.Proposal {
	var out []message.Proposal
	for _, p := range ps {
		q := p
		q.Transforms = nil
		has := false
		for _, t := range p.Transforms {
			if t.Type == message.TransDH {
				if t.ID != g {
					continue
				}
				has = true
			}
			q.Transforms = append(q.Transforms, t)
		}
		if has {
			out = append(out, q)
		}
	}
	return out
}
