package ike

import (
	"fmt"

	"github.com/ipsecd/ipsecd/ike/message"
)

// EAP-only authentication (RFC 5998): a gateway whose local auth is eap
// sends no certificate AUTH in its first IKE_AUTH response; it proves
// itself by the EAP method, which must be mutual (EAP-MSCHAPv2's
// authenticator response, EAP-TLS's server certificate) and leave an MSK,
// and by its last AUTH, keyed by that MSK. As strongSwan (ike_auth.c):
// the gateway does so only for a client that sent
// EAP_ONLY_AUTHENTICATION, and refuses the others; a client sends the
// notify whenever it authenticates with EAP, and accepts a first
// response without AUTH only when its remote auth is eap and its method
// mutual. EAP-MD5 proves nothing of the gateway and makes no MSK: it is
// refused on both sides, when the config is checked.
//
//	IDi [IDr] N(EAP_ONLY) SA TSi TSr  -->  IDr EAP(Identity)
//	... the EAP rounds of eap.go, then the AUTHs keyed by the MSK.

// validateEAPOnly checks a gateway's local auth eap: a mutual method on
// remote, and for EAP-TLS the certificate that proves us in TLS.
func (c *Config) validateEAPOnly() error {
	r := c.remoteAuth()
	switch {
	case !r.Mutual():
		return fmt.Errorf("ike: local auth eap (EAP-only, RFC 5998) needs remote auth eap-mschapv2 or eap-tls, a method that proves us to the client; %q does not", r)
	case r == AuthEAPTLS && (len(c.LocalCerts) == 0 || c.PrivateKey == nil):
		return fmt.Errorf("ike: local auth eap with remote auth eap-tls needs our certificate and key: they prove us inside EAP-TLS")
	case c.LocalID.IsAny():
		return fmt.Errorf("ike: local auth eap needs a local id: the IDr our last AUTH covers")
	}
	return nil
}

// responderEAPAuth checks that the peer's IDr, if any, is us, and
// returns what our first answer carries before the EAP request: IDr
// [CERT+] AUTH, or with EAP-only IDr alone. On error the SA failed and
// the payloads refuse.
func (s *SA) responderEAPAuth(ps []message.Payload) ([]message.Payload, error) {
	if s.cfg.localAuth() != AuthEAPOnly {
		return s.responderAuth(ps)
	}
	if _, ok := notifyOf(ps, message.EAPOnlyAuthentication); !ok {
		return s.refuseEAP(fmt.Errorf(`%w: "%s" did not send EAP_ONLY_AUTHENTICATION; we prove ourselves by EAP alone (local auth eap)`, ErrAuthFailed, IdentityOf(message.ID(message.Get(ps, message.TypeIDi)))))
	}
	if idr := message.ID(message.Get(ps, message.TypeIDr)); idr != nil && !s.cfg.LocalID.Matches(IdentityOf(idr)) {
		return s.refuseEAP(fmt.Errorf(`%w: peer wants to talk to "%s", we are "%s"`, ErrAuthFailed, IdentityOf(idr), s.localID))
	}
	return []message.Payload{{Type: message.TypeIDr, Body: s.localID.payload()}}, nil
}

// gatewayFirstAuth checks the gateway's first IKE_AUTH response before
// its EAP request: its certificate AUTH, or with remote auth eap the
// absence of one and its IDr.
func (s *SA) gatewayFirstAuth(ps []message.Payload) error {
	if s.cfg.remoteAuth() != AuthEAPOnly {
		return s.verifyAuth(ps, message.TypeIDr)
	}
	idr := message.ID(message.Get(ps, message.TypeIDr))
	switch {
	case !idr.IsValid() || idr.Type() == 0:
		return fmt.Errorf("%w: no IDr payload", ErrAuthFailed)
	case message.Get(ps, message.TypeAUTH) != nil:
		return fmt.Errorf(`%w: the gateway "%s" sent AUTH; we expect it to prove itself by EAP alone (remote auth eap)`, ErrAuthFailed, IdentityOf(idr))
	case !s.cfg.RemoteID.Matches(IdentityOf(idr)):
		return fmt.Errorf(`%w: gateway is "%s", want "%s"`, ErrAuthFailed, IdentityOf(idr), s.cfg.RemoteID)
	}
	s.peerID, s.peerAuth = IdentityOf(idr), AuthEAPOnly
	return nil
}

// eapOnlyKey reports whether the EAP key is one EAP-only may rest on:
// without EAP-only anything goes, with it the MSK of a mutual method.
func (s *SA) eapOnlyKey() error {
	eapOnly := s.cfg.localAuth() == AuthEAPOnly || s.cfg.remoteAuth() == AuthEAPOnly
	if eapOnly && len(s.hs.msk) == 0 {
		return fmt.Errorf("%w: EAP-only authentication, and the method left no MSK to prove the gateway", ErrAuthFailed)
	}
	return nil
}
