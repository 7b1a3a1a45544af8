package ike

import (
	"bytes"
	"crypto/hmac"
	"errors"
	"fmt"
	"time"

	"github.com/ipsecd/ipsecd/ike/eap"
	"github.com/ipsecd/ipsecd/ike/keys"
	"github.com/ipsecd/ipsecd/ike/message"
)

// EAP in IKE_AUTH (RFC 7296 §2.16), the initiator's side: a road warrior
// with local auth eap-mschapv2 or eap-md5 leaves AUTH out of its first
// IKE_AUTH request, checks the gateway's certificate AUTH in the first
// response, answers the EAP requests (package ike/eap's Client) and,
// after EAP-Success, sends an AUTH keyed with the method's MSK, or with
// SK_pi when it makes none (EAP-MD5, as the gateway side in eap.go and
// strongSwan's eap_authenticator). The gateway's last AUTH is keyed the
// same way, with SK_pr:
//
//	IDi CERTREQ [IDr] [CP] SA TSi TSr  -->  IDr CERT+ AUTH EAP(request)
//	EAP(response)                      -->  EAP(request)     (each round)
//	EAP(response)                      -->  EAP(Success)
//	AUTH                               -->  AUTH [CP] SA TSi TSr
//
// The SA stays in StateAuthSent throughout. The password is read from
// Config.EAPSecret when the first EAP request comes, copied into the
// method, and wiped with it.

// eapIdentity is our EAP identity as a client: LocalEAPID, or our IKE
// identity (strongSwan's eap_id defaults to id).
func (c *Config) eapIdentity() string {
	if c.LocalEAPID != "" {
		return c.LocalEAPID
	}
	return c.LocalID.String()
}

// validateEAPClient checks what local auth EAP needs: the gateway proves
// itself with a certificate before we send anything keyed by the
// password, or by a mutual method alone (remote auth eap, eaponly.go);
// the password is known, or for EAP-TLS our certificate proves our EAP
// identity and the gateway's TLS certificate has trust anchors.
func (c *Config) validateEAPClient() error {
	a := c.localAuth()
	switch {
	case a == AuthEAPRADIUS:
		return fmt.Errorf("ike: local auth %q: eap-radius is the gateway's (remote auth); a client runs eap-mschapv2, eap-md5 or eap-tls", a)
	case c.remoteAuth() == AuthEAPOnly && !a.Mutual():
		return fmt.Errorf("ike: local auth %q with remote auth eap: EAP-only authentication (RFC 5998) needs a method that proves the gateway, eap-mschapv2 or eap-tls", a)
	case c.remoteAuth() != AuthPubkey && c.remoteAuth() != AuthEAPOnly:
		return fmt.Errorf("ike: local auth %q needs remote auth pubkey: the gateway proves itself with its certificate before we send the password's proof (RFC 7296 §2.16)", a)
	case c.LocalID.IsAny():
		return fmt.Errorf("ike: local auth %q needs a local id (our IDi; the EAP identity is eap_id's, or the id's)", a)
	case a == AuthEAPTLS:
		return c.validateEAPTLSClient()
	case c.EAPSecret == nil:
		return fmt.Errorf("ike: local auth %q needs our password (EAPSecret)", a)
	}
	if _, ok := c.EAPSecret(c.eapIdentity()); !ok {
		return fmt.Errorf("ike: local auth %q: no eap secret for EAP identity %q", a, c.eapIdentity())
	}
	return nil
}

// validateEAPTLSClient checks local auth eap-tls: our certificate proves
// the EAP identity the gateway holds it to, and there are trust anchors
// for the gateway's.
func (c *Config) validateEAPTLSClient() error {
	if len(c.CACerts) == 0 {
		return errors.New("ike: local auth eap-tls needs cacerts (remote): the trust anchors of the gateway's TLS certificate")
	}
	if len(c.LocalCerts) == 0 || c.PrivateKey == nil {
		return errors.New("ike: local auth eap-tls needs a certificate and its private key")
	}
	id, err := ParseIdentity(c.eapIdentity())
	if err != nil {
		return fmt.Errorf("ike: local auth eap-tls: EAP identity %q: %w", c.eapIdentity(), err)
	}
	if !certProves(c.LocalCerts[0], id) {
		return fmt.Errorf(`ike: local auth eap-tls: the EAP identity "%s" is neither the subject nor a subjectAltName of the local certificate (%s); the gateway would refuse it`, id, c.LocalCerts[0].Subject)
	}
	return nil
}

// handleEAPAuthResponse is one IKE_AUTH response while we authenticate
// with EAP.
func (s *SA) handleEAPAuthResponse(ps []message.Payload, now time.Time) ([]byte, error) {
	switch {
	case s.hs.eapClient == nil:
		return s.eapFirstResponse(ps, now)
	case !s.hs.eapDone:
		return s.eapClientRound(ps, now)
	}
	return nil, s.eapLastResponse(ps)
}

// refuseGateway ends the SA with err, telling the gateway with an
// INFORMATIONAL AUTHENTICATION_FAILED (RFC 7296 §2.21.2), sent once.
func (s *SA) refuseGateway(err error, now time.Time) ([]byte, error) {
	if s.hs.eapClient != nil {
		s.hs.eapClient.Wipe()
	}
	msg, _ := s.request(message.Informational, []message.Payload{notify(message.AuthenticationFailed, nil)}, now)
	return msg, s.fail(err)
}

// eapFirstResponse checks the gateway's certificate AUTH and answers its
// first EAP request.
func (s *SA) eapFirstResponse(ps []message.Payload, now time.Time) ([]byte, error) {
	if _, ok := notifyOf(ps, message.AuthenticationFailed); ok {
		return nil, s.fail(fmt.Errorf("%w: the gateway refused our IKE_AUTH request (identity %q, %s)", ErrAuthFailed, s.localID, s.cfg.localAuth()))
	}
	if err := s.gatewayFirstAuth(ps); err != nil { // eaponly.go
		return s.refuseGateway(err, now)
	}
	in := message.Get(ps, message.TypeEAP)
	if in == nil {
		return s.refuseGateway(fmt.Errorf("%w: the gateway answered without EAP; we authenticate with %s", ErrAuthFailed, s.cfg.localAuth()), now)
	}
	s.hs.peerIDr = bytes.Clone(message.Get(ps, message.TypeIDr))
	peer, err := s.newEAPPeer(s.peerID) // eap_methods.go
	if err != nil {
		return s.refuseGateway(err, now)
	}
	s.hs.eapClient = peer
	return s.eapClientStep(in, ps, now)
}

// eapClientRound answers the gateway's next EAP packet.
func (s *SA) eapClientRound(ps []message.Payload, now time.Time) ([]byte, error) {
	in := message.Get(ps, message.TypeEAP)
	if in == nil {
		if _, ok := notifyOf(ps, message.AuthenticationFailed); ok {
			s.hs.eapClient.Wipe()
			return nil, s.fail(fmt.Errorf("%w: the gateway refused %s of %q", ErrAuthFailed, eap.MethodName(s.cfg.localAuth().EAPType()), s.cfg.eapIdentity()))
		}
		return s.refuseGateway(fmt.Errorf("%w: an IKE_AUTH response without EAP during %s", ErrAuthFailed, eap.MethodName(s.cfg.localAuth().EAPType())), now)
	}
	return s.eapClientStep(in, ps, now)
}

// eapClientStep passes the gateway's EAP packet in (of response ps) to
// the method and sends what follows: our EAP response, or after
// EAP-Success our AUTH.
func (s *SA) eapClientStep(in []byte, ps []message.Payload, now time.Time) ([]byte, error) {
	out, st, err := s.hs.eapClient.Handle(in)
	switch st {
	case eap.Failed:
		err = fmt.Errorf("%w: %w", ErrAuthFailed, err)
		// in may be any bytes the gateway sent (an empty EAP payload, say):
		// only a valid packet has a Code to read.
		if _, ok := notifyOf(ps, message.AuthenticationFailed); ok || message.EAP(in).IsValid() && message.EAP(in).Code() == message.EAPFailure {
			return nil, s.fail(err) // the gateway ended it already
		}
		return s.refuseGateway(err, now)
	case eap.Succeeded:
		s.hs.eapDone, s.hs.msk = true, s.hs.eapClient.MSK()
		s.hs.eapClient.Wipe()
		if err := s.eapOnlyKey(); err != nil {
			return s.refuseGateway(err, now)
		}
		idi := s.localID.payload()
		auth := keys.PSKAuth(s.prf, s.eapKey(s.keys.PI), s.hs.initReq, s.hs.nr, s.keys.PI, idi, s.intAuth())
		return s.request(message.IKEAuth, []message.Payload{{Type: message.TypeAUTH, Body: message.AppendAuth(nil, message.AuthSharedKey, auth)}}, now)
	}
	return s.request(message.IKEAuth, []message.Payload{{Type: message.TypeEAP, Body: out}}, now)
}

// eapLastResponse checks the gateway's AUTH keyed by the EAP key and
// takes the first child: the SA is up.
func (s *SA) eapLastResponse(ps []message.Payload) error {
	defer func() { clear(s.hs.msk) }()
	if _, ok := notifyOf(ps, message.AuthenticationFailed); ok {
		return s.fail(fmt.Errorf("%w: the gateway refused our AUTH after EAP-Success of %q", ErrAuthFailed, s.cfg.eapIdentity()))
	}
	auth := message.Auth(message.Get(ps, message.TypeAUTH))
	if !auth.IsValid() || auth.Method() != message.AuthSharedKey {
		return s.fail(fmt.Errorf("%w: no AUTH of the EAP key from the gateway after EAP-Success", ErrAuthFailed))
	}
	want := keys.PSKAuth(s.prf, s.eapKey(s.keys.PR), s.hs.initResp, s.hs.ni, s.keys.PR, s.hs.peerIDr, s.intAuth())
	if !hmac.Equal(want, auth.Data()) {
		return s.fail(fmt.Errorf(`%w: the gateway's AUTH of "%s" does not verify with the EAP key`, ErrAuthFailed, s.peerID))
	}
	return s.childFromAuth(ps)
}
