package ike

import (
	"crypto/hmac"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/ipsecd/ipsecd/ike/keys"
	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/ike/proposal"
)

// childProposals are the configured ESP proposals as IKE_AUTH carries
// them: without groups, with our inbound SPI.
func (s *SA) childProposals(spi uint32) []message.Proposal {
	var ps []proposal.Proposal
	for _, p := range s.cfg.Child.Proposals {
		ps = append(ps, p.WithoutDH())
	}
	return proposal.Messages(ps, binary.BigEndian.AppendUint32(nil, spi))
}

func childConfigNoDH(cc *ChildConfig) []proposal.Proposal {
	var ps []proposal.Proposal
	for _, p := range cc.Proposals {
		ps = append(ps, p.WithoutDH())
	}
	return ps
}

// authRequest builds the initiator's IKE_AUTH request (RFC 7296 §1.2):
// IDi [CERT+] [CERTREQ] [IDr] AUTH [N(INITIAL_CONTACT)]
// [N(USE_TRANSPORT_MODE)] [CP(CFG_REQUEST)] SA TSi TSr.
func (s *SA) authRequest(now time.Time) ([]byte, error) {
	spi, err := s.cfg.newSPI()
	if err != nil {
		return nil, err
	}
	s.hs.childInSPI = spi
	idi := s.localID.payload()
	var auth message.Payload
	if !s.cfg.localAuth().IsEAP() { // EAP's AUTH comes after it (eap_client.go)
		if auth, err = s.ourAuth(idi); err != nil {
			return nil, err
		}
	}
	ps := []message.Payload{{Type: message.TypeIDi, Body: idi}}
	if s.cfg.localAuth() == AuthPubkey {
		ps = append(ps, s.cfg.certPayloads(s.hs.peerCertReq)...)
	}
	if s.cfg.remoteAuth() == AuthPubkey {
		ps = append(ps, s.cfg.certReq())
	}
	if !s.cfg.RemoteID.IsAny() {
		ps = append(ps, message.Payload{Type: message.TypeIDr, Body: s.cfg.RemoteID.payload()})
	}
	if auth.Type != 0 {
		ps = append(ps, auth)
	}
	if s.cfg.initialContact() {
		ps = append(ps, notify(message.InitialContact, nil))
	}
	if s.cfg.localAuth().IsEAP() {
		// As charon: a gateway that proves itself by EAP alone may
		// (RFC 5998); whether we accept that is remote auth eap's.
		ps = append(ps, notify(message.EAPOnlyAuthentication, nil))
	}
	if s.cfg.Child.Transport {
		ps = append(ps, notify(message.UseTransportMode, nil))
	}
	ps = append(ps, s.cfg.cfgRequest()...) // cp_client.go
	ps = append(ps,
		message.Payload{Type: message.TypeSA, Body: message.AppendSA(nil, s.childProposals(spi))},
		message.Payload{Type: message.TypeTSi, Body: message.AppendTS(nil, prefixSelectors(s.cfg.Child.LocalTS))},
		message.Payload{Type: message.TypeTSr, Body: message.AppendTS(nil, prefixSelectors(s.cfg.Child.RemoteTS))},
	)
	return s.request(message.IKEAuth, ps, now)
}

// ourAuth returns our AUTH payload for our ID body: the PSK MIC, or a
// signature with the certificate's key over our IKE_SA_INIT message, the
// peer's nonce and prf(SK_p, ID) (RFC 7296 §2.15).
func (s *SA) ourAuth(id []byte) (message.Payload, error) {
	msg, nonce, skp := s.hs.initReq, s.hs.nr, s.keys.PI
	if !s.initiator {
		msg, nonce, skp = s.hs.initResp, s.hs.ni, s.keys.PR
	}
	if s.cfg.localAuth() == AuthPSK {
		auth := keys.PSKAuth(s.prf, s.cfg.PSK, msg, nonce, skp, id, s.intAuth())
		return message.Payload{Type: message.TypeAUTH, Body: message.AppendAuth(nil, message.AuthSharedKey, auth)}, nil
	}
	hashes := s.hs.peerHashes
	if s.cfg.ClassicSignatures {
		hashes = nil
	}
	m, sig, err := sign(s.cfg.PrivateKey, keys.SignedOctets(s.prf, msg, nonce, skp, id, s.intAuth()), hashes, s.cfg.rand())
	if err != nil {
		return message.Payload{}, fmt.Errorf("ike: signing AUTH: %w", err)
	}
	return message.Payload{Type: message.TypeAUTH, Body: message.AppendAuth(nil, m, sig)}, nil
}

// verifyAuth checks the peer's ID and AUTH payloads: the ID is the one
// configured and AUTH is the PSK MIC over its IKE_SA_INIT message, our
// nonce and its ID (RFC 7296 §2.15), or, with remote auth pubkey, a
// signature over the same by the key of a certificate that chains to our
// CACerts and proves the ID.
func (s *SA) verifyAuth(ps []message.Payload, idType message.PayloadType) error {
	idBody := message.ID(message.Get(ps, idType))
	auth := message.Auth(message.Get(ps, message.TypeAUTH))
	if !idBody.IsValid() || !auth.IsValid() || idBody.Type() == 0 {
		return fmt.Errorf("%w: no %v or AUTH payload", ErrAuthFailed, idType)
	}
	id := IdentityOf(idBody)
	if !s.cfg.RemoteID.Matches(id) {
		return fmt.Errorf(`%w: peer is "%s", want "%s"`, ErrAuthFailed, id, s.cfg.RemoteID)
	}
	msg, nonce, skp := s.hs.initReq, s.hs.nr, s.keys.PI
	if s.initiator {
		msg, nonce, skp = s.hs.initResp, s.hs.ni, s.keys.PR
	}
	if s.cfg.remoteAuth() == AuthPubkey {
		if auth.Method() == message.AuthSharedKey {
			return fmt.Errorf(`%w: "%s" uses a pre-shared key; we want a certificate (remote auth pubkey)`, ErrAuthFailed, id)
		}
		cert, err := s.verifyPeerCert(ps, id)
		if err != nil {
			return err
		}
		if err := verifySignature(cert.PublicKey, auth.Method(), auth.Data(), keys.SignedOctets(s.prf, msg, nonce, skp, idBody, s.intAuth())); err != nil {
			return fmt.Errorf(`%w: AUTH of "%s" (certificate %q): %v`, ErrAuthFailed, id, cert.Subject, err)
		}
		s.peerID, s.peerAuth = id, AuthPubkey
		return nil
	}
	if auth.Method() != message.AuthSharedKey {
		return fmt.Errorf("%w: peer uses auth method %d, not a pre-shared key", ErrAuthFailed, auth.Method())
	}
	want := keys.PSKAuth(s.prf, s.cfg.PSK, msg, nonce, skp, idBody, s.intAuth())
	if !hmac.Equal(want, auth.Data()) {
		return fmt.Errorf(`%w: AUTH of "%s" does not verify (pre-shared keys differ)`, ErrAuthFailed, id)
	}
	s.peerID, s.peerAuth = id, AuthPSK
	return nil
}

// handleAuthRequest is the responder's side of IKE_AUTH; a peer that
// authenticates with EAP takes several (eap.go).
func (s *SA) handleAuthRequest(ps []message.Payload) ([]message.Payload, error) {
	if s.cfg.remoteAuth().IsEAP() {
		return s.handleEAPAuth(ps)
	}
	s.hs.peerCertReq = parseCertReqs(ps)
	if err := s.verifyAuth(ps, message.TypeIDi); err != nil {
		s.fail(err)
		return []message.Payload{notify(message.AuthenticationFailed, nil)}, err
	}
	reply, err := s.responderAuth(ps)
	if err != nil {
		return reply, err
	}
	return s.establish(ps, reply, s.peerID.String())
}

// responderAuth checks that the peer's IDr, if any, is us, and returns
// our IDr [CERT+] AUTH; on error the SA failed and the payloads refuse.
func (s *SA) responderAuth(ps []message.Payload) ([]message.Payload, error) {
	if idr := message.ID(message.Get(ps, message.TypeIDr)); idr != nil && !s.cfg.LocalID.Matches(IdentityOf(idr)) {
		err := fmt.Errorf(`%w: peer wants to talk to "%s", we are "%s"`, ErrAuthFailed, IdentityOf(idr), s.localID)
		s.fail(err)
		return []message.Payload{notify(message.AuthenticationFailed, nil)}, err
	}
	idr := s.localID.payload()
	auth, err := s.ourAuth(idr)
	if err != nil {
		s.fail(err)
		return []message.Payload{notify(message.AuthenticationFailed, nil)}, err
	}
	reply := []message.Payload{{Type: message.TypeIDr, Body: idr}}
	if s.cfg.localAuth() == AuthPubkey {
		reply = append(reply, s.cfg.certPayloads(s.hs.peerCertReq)...)
	}
	return append(reply, auth), nil
}

// establish ends the responder's IKE_AUTH whose request was ps, once the
// peer authenticated as identity (its EAP identity, if any): the SA is
// up, the peer's INITIAL_CONTACT reported, its CFG_REQUEST answered
// (cp.go) and its first child accepted, appended to reply.
func (s *SA) establish(ps, reply []message.Payload, identity string) ([]message.Payload, error) {
	_, contact := notifyOf(ps, message.InitialContact)
	if s.cfg.Admit != nil && !s.cfg.Admit(s, contact) {
		err := fmt.Errorf("%w: %w", ErrAuthFailed, ErrDuplicate)
		s.fail(err)
		return []message.Payload{notify(message.AuthenticationFailed, nil)}, err
	}
	s.state = StateEstablished
	s.events = append(s.events, Event{Kind: EventIKEUp})
	// Only an authenticated request may have the daemon delete SAs. In
	// a response it is ignored, as charon does.
	if contact {
		s.events = append(s.events, Event{Kind: EventInitialContact, Peer: s.peerID})
	}
	cp, err := s.answerCP(ps, identity)
	if err != nil {
		return append(reply, notify(message.InternalAddressFailure, nil)), fmt.Errorf("%w: %w", ErrChildFailed, err)
	}
	reply = append(reply, cp...)
	child, refuse, err := s.acceptChild(ps)
	if err != nil {
		return append(reply, notify(refuse, nil)), fmt.Errorf("%w: %w", ErrChildFailed, err)
	}
	if child.Transport {
		reply = append(reply, notify(message.UseTransportMode, nil))
	}
	reply = append(reply,
		message.Payload{Type: message.TypeSA, Body: message.AppendSA(nil, []message.Proposal{child.Suite.Proposal()})},
		message.Payload{Type: message.TypeTSi, Body: message.AppendTS(nil, child.RemoteTS)},
		message.Payload{Type: message.TypeTSr, Body: message.AppendTS(nil, child.LocalTS)},
	)
	s.children = append(s.children, child)
	s.events = append(s.events, Event{Kind: EventChildUp, Child: child})
	return reply, nil
}

// acceptChild chooses the child's proposal and narrows its selectors, or
// says which notify refuses it.
func (s *SA) acceptChild(ps []message.Payload) (*Child, message.NotifyType, error) {
	sas, err := message.SA(message.Get(ps, message.TypeSA)).Proposals()
	if err != nil {
		return nil, message.InvalidSyntax, err
	}
	tsi, err1 := message.TS(message.Get(ps, message.TypeTSi)).Selectors()
	tsr, err2 := message.TS(message.Get(ps, message.TypeTSr)).Selectors()
	if err1 != nil || err2 != nil {
		return nil, message.InvalidSyntax, fmt.Errorf("%w: bad TSi or TSr", ErrProtocol)
	}
	cc, local, remote := s.selectChild(tsi, tsr)
	if cc == nil {
		return nil, message.TSUnacceptable, fmt.Errorf("%w: peer's TSi/TSr do not meet the remote_ts/local_ts of any child", ErrTSUnacceptable)
	}
	if len(s.leases) > 0 {
		// The peer's side is its virtual IPs (remote_ts dynamic).
		if remote = narrow(remote, s.vipSelectors()); len(remote) == 0 {
			return nil, message.TSUnacceptable, fmt.Errorf("%w: child %q: remote_ts does not hold the peer's virtual IP %v", ErrTSUnacceptable, cc.Name, s.VirtualIPs())
		}
	}
	esp, err := proposal.Select(childConfigNoDH(cc), sas, true)
	if err != nil || len(esp.SPI) != 4 {
		return nil, message.NoProposalChosen, fmt.Errorf("%w: child %q: peer offered %s; we accept %s", ErrNoProposalChosen, cc.Name, proposal.FormatList(sas), proposal.FormatList(proposal.Messages(childConfigNoDH(cc), nil)))
	}
	inSPI, err := s.cfg.newSPI()
	if err != nil {
		return nil, message.TemporaryFailure, err
	}
	_, wantTransport := notifyOf(ps, message.UseTransportMode)
	outSPI := binary.BigEndian.Uint32(esp.SPI)
	esp.SPI = binary.BigEndian.AppendUint32(nil, inSPI)
	return s.newChild(cc, esp, inSPI, outSPI, local, remote, wantTransport && cc.Transport, nil, s.hs.ni, s.hs.nr, false), 0, nil
}

// handleAuthResponse is the initiator's side of IKE_AUTH. When the
// responder does not authenticate, it returns an INFORMATIONAL request
// telling it so (RFC 7296 §2.21.2), sent once: the SA is gone.
func (s *SA) handleAuthResponse(ps []message.Payload, now time.Time) ([]byte, error) {
	if s.cfg.localAuth().IsEAP() {
		return s.handleEAPAuthResponse(ps, now)
	}
	if _, ok := notifyOf(ps, message.AuthenticationFailed); ok {
		return nil, s.fail(fmt.Errorf("%w: the responder refused our AUTH", ErrAuthFailed))
	}
	if err := s.verifyAuth(ps, message.TypeIDr); err != nil {
		msg, _ := s.request(message.Informational, []message.Payload{notify(message.AuthenticationFailed, nil)}, now)
		return msg, s.fail(err)
	}
	return nil, s.childFromAuth(ps)
}

// childFromAuth takes the first child from the responder's IKE_AUTH.
func (s *SA) childFromAuth(ps []message.Payload) error {
	s.state = StateEstablished
	s.events = append(s.events, Event{Kind: EventIKEUp})
	if t, ok := firstError(ps); ok {
		return fmt.Errorf("%w: responder answered notify %d", childRefused(t), t)
	}
	if err := s.takeCFGReply(ps); err != nil {
		return err
	}
	sas, err := message.SA(message.Get(ps, message.TypeSA)).Proposals()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrChildFailed, err)
	}
	esp, err := proposal.CheckChoice(childConfigNoDH(&s.cfg.Child), sas, true)
	if err != nil || len(esp.SPI) != 4 {
		return fmt.Errorf("%w: %v", ErrChildFailed, proposal.ErrBadChoice)
	}
	tsi, err1 := message.TS(message.Get(ps, message.TypeTSi)).Selectors()
	tsr, err2 := message.TS(message.Get(ps, message.TypeTSr)).Selectors()
	if err1 != nil || err2 != nil || !within(tsi, prefixSelectors(s.cfg.Child.LocalTS)) || !within(tsr, prefixSelectors(s.cfg.Child.RemoteTS)) {
		return fmt.Errorf("%w: %w: the responder widened or garbled the selectors", ErrChildFailed, ErrTSUnacceptable)
	}
	_, transport := notifyOf(ps, message.UseTransportMode)
	outSPI := binary.BigEndian.Uint32(esp.SPI)
	esp.SPI = binary.BigEndian.AppendUint32(nil, s.hs.childInSPI)
	child := s.newChild(&s.cfg.Child, esp, s.hs.childInSPI, outSPI, tsi, tsr, transport && s.cfg.Child.Transport, nil, s.hs.ni, s.hs.nr, true)
	s.children = append(s.children, child)
	s.events = append(s.events, Event{Kind: EventChildUp, Child: child})
	return nil
}

// childRefused is the error of a child the peer refused with notify t:
// ErrChildFailed, wrapping the error t names where there is one, so that
// the daemon can say why (ipsecd monitor's child_failed).
func childRefused(t message.NotifyType) error {
	switch t {
	case message.NoProposalChosen:
		return fmt.Errorf("%w: %w", ErrChildFailed, ErrNoProposalChosen)
	case message.TSUnacceptable:
		return fmt.Errorf("%w: %w", ErrChildFailed, ErrTSUnacceptable)
	case message.InvalidKEPayload:
		return fmt.Errorf("%w: %w", ErrChildFailed, ErrInvalidKE)
	}
	return ErrChildFailed
}
