package ike

import (
	"bytes"
	"crypto/hmac"
	"fmt"

	"github.com/ipsecd/ipsecd/ike/eap"
	"github.com/ipsecd/ipsecd/ike/keys"
	"github.com/ipsecd/ipsecd/ike/message"
)

// EAP in IKE_AUTH (RFC 7296 §2.16), the responder's side: the gateway
// proves itself with its certificate, the peer with an EAP method
// (package ike/eap) run over further IKE_AUTH exchanges, and both then
// send an AUTH keyed by the method's MSK, or by SK_pi and SK_pr when it
// makes none (EAP-MD5; strongSwan does the same). The exchanges, one call
// of handleEAPAuth each:
//
//	IDi [CERTREQ] [IDr] [CP] SA TSi TSr  -->  IDr CERT+ AUTH EAP(Identity)
//	EAP(response)                        -->  EAP(request)     (each round)
//	EAP(response)                        -->  EAP(Success)
//	AUTH                                 -->  AUTH [CP] SA TSi TSr
//
// A wrong secret or an unknown identity ends the SA with
// AUTHENTICATION_FAILED after EAP(Failure). The SA stays in
// StateInitDone until the last exchange, so that the half-open limits
// and deadline bound the whole conversation.

// handleEAPAuth is one IKE_AUTH request of a peer that authenticates
// with EAP.
func (s *SA) handleEAPAuth(ps []message.Payload) ([]message.Payload, error) {
	switch {
	case s.hs.eap == nil:
		return s.startEAP(ps)
	case !s.hs.eapDone:
		return s.eapRound(ps)
	}
	return s.finishEAP(ps)
}

// refuseEAP ends the SA with err, answering AUTHENTICATION_FAILED after
// the payloads given (an EAP-Failure).
func (s *SA) refuseEAP(err error, ps ...message.Payload) ([]message.Payload, error) {
	s.fail(err)
	return append(ps, notify(message.AuthenticationFailed, nil)), err
}

// startEAP answers the first IKE_AUTH request: our certificate and AUTH,
// and the EAP-Identity request. What the last answer needs of the
// request (its IDi, SA, TSi, TSr, CP and notifies) is kept, copied.
func (s *SA) startEAP(ps []message.Payload) ([]message.Payload, error) {
	idi := message.ID(message.Get(ps, message.TypeIDi))
	switch {
	case !idi.IsValid() || idi.Type() == 0:
		return s.refuseEAP(fmt.Errorf("%w: no IDi payload", ErrAuthFailed))
	case message.Get(ps, message.TypeAUTH) != nil:
		return s.refuseEAP(fmt.Errorf(`%w: "%s" sent AUTH; we want %s (remote auth %s)`, ErrAuthFailed, IdentityOf(idi), eap.MethodName(s.cfg.remoteAuth().EAPType()), s.cfg.remoteAuth()))
	case !s.cfg.RemoteID.Matches(IdentityOf(idi)):
		return s.refuseEAP(fmt.Errorf(`%w: peer is "%s", want "%s"`, ErrAuthFailed, IdentityOf(idi), s.cfg.RemoteID))
	}
	s.hs.peerCertReq = parseCertReqs(ps)
	reply, err := s.responderEAPAuth(ps)
	if err != nil {
		return reply, err
	}
	for _, p := range ps {
		if p.Type != message.TypeCERT && p.Type != message.TypeCREQ {
			p.Body = bytes.Clone(p.Body)
			s.hs.authReq = append(s.hs.authReq, p)
		}
	}
	if s.cfg.remoteAuth() == AuthEAPRADIUS {
		if s.cfg.EAPRelay == nil {
			return s.refuseEAP(fmt.Errorf("%w: remote auth eap-radius without a RADIUS client", ErrAuthFailed))
		}
		s.hs.eap = s.cfg.EAPRelay(s)
	} else {
		s.hs.eap = s.newEAPServer() // eap_methods.go
	}
	first, err := s.hs.eap.Start()
	if err != nil {
		return s.refuseEAP(fmt.Errorf("%w: %v", ErrAuthFailed, err))
	}
	return append(reply, message.Payload{Type: message.TypeEAP, Body: first}), nil
}

// eapRound passes the peer's EAP response to the method and answers
// with its next packet.
func (s *SA) eapRound(ps []message.Payload) ([]message.Payload, error) {
	in := message.Get(ps, message.TypeEAP)
	if in == nil {
		return s.refuseEAP(fmt.Errorf("%w: an IKE_AUTH request without EAP during %s", ErrAuthFailed, s.eapName()))
	}
	m, ok := s.hs.eap.(eapMethod)
	if !ok {
		return s.relayRound(in) // eaprelay.go
	}
	out, st, err := m.Handle(in)
	reply := message.Payload{Type: message.TypeEAP, Body: out}
	switch st {
	case eap.Failed:
		return s.refuseEAP(fmt.Errorf("%w: %w", ErrAuthFailed, err), reply)
	case eap.Succeeded:
		defer m.Wipe()
		return s.eapSucceeded(out, m.Identity(), m.MSK())
	}
	return []message.Payload{reply}, nil
}

// eapName names the EAP the SA runs, for errors.
func (s *SA) eapName() string {
	if m, ok := s.hs.eap.(eapMethod); ok {
		return eap.MethodName(m.Method())
	}
	return "EAP relayed to RADIUS"
}

// eapSucceeded takes the method's EAP-Success, out, for identity with
// msk, once the identity is one the connection admits.
func (s *SA) eapSucceeded(out []byte, identity string, msk []byte) ([]message.Payload, error) {
	if s.cfg.RemoteEAPID != "" && identity != s.cfg.RemoteEAPID {
		clear(msk)
		return s.refuseEAP(fmt.Errorf("%w: EAP identity %q, the connection admits %q alone (eap_id)", ErrAuthFailed, identity, s.cfg.RemoteEAPID),
			message.Payload{Type: message.TypeEAP, Body: message.AppendEAPResult(nil, message.EAPFailure, message.EAP(out).Identifier())})
	}
	s.hs.eapDone, s.hs.msk, s.eapID = true, msk, identity
	return []message.Payload{{Type: message.TypeEAP, Body: out}}, nil
}

// eapKey is what the AUTH payloads after EAP are keyed with: the MSK,
// or without one the sender's SK_p (RFC 7296 §2.16).
func (s *SA) eapKey(skp []byte) []byte {
	if len(s.hs.msk) > 0 {
		return s.hs.msk
	}
	return skp
}

// finishEAP checks the peer's AUTH after EAP-Success and answers with
// ours, the CFG_REPLY and the first child: the SA is up.
func (s *SA) finishEAP(ps []message.Payload) ([]message.Payload, error) {
	defer func() { clear(s.hs.msk) }()
	idi := message.ID(message.Get(s.hs.authReq, message.TypeIDi))
	auth := message.Auth(message.Get(ps, message.TypeAUTH))
	if !auth.IsValid() || auth.Method() != message.AuthSharedKey {
		return s.refuseEAP(fmt.Errorf("%w: no AUTH of the EAP key after EAP-Success of %q", ErrAuthFailed, s.eapID))
	}
	if err := s.eapOnlyKey(); err != nil { // eaponly.go
		return s.refuseEAP(err)
	}
	want := keys.PSKAuth(s.prf, s.eapKey(s.keys.PI), s.hs.initReq, s.hs.nr, s.keys.PI, idi, s.intAuth())
	if !hmac.Equal(want, auth.Data()) {
		return s.refuseEAP(fmt.Errorf(`%w: AUTH of "%s" (EAP identity %q) does not verify with the EAP key`, ErrAuthFailed, IdentityOf(idi), s.eapID))
	}
	s.peerID, s.peerAuth = IdentityOf(idi), s.cfg.remoteAuth()
	idr := s.localID.payload()
	ours := keys.PSKAuth(s.prf, s.eapKey(s.keys.PR), s.hs.initResp, s.hs.ni, s.keys.PR, idr, s.intAuth())
	reply := []message.Payload{{Type: message.TypeAUTH, Body: message.AppendAuth(nil, message.AuthSharedKey, ours)}}
	return s.establish(s.hs.authReq, reply, s.eapID)
}
