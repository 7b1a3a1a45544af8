package ike

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"

	"github.com/ipsecd/ipsecd/ike/eap"
	"github.com/ipsecd/ipsecd/ike/message"
)

// Which EAP method an auth class runs, and with what: the password
// methods check EAPSecret; EAP-TLS proves each side with a certificate
// inside EAP (RFC 5216, RFC 9190), the gateway with its IKE certificate
// and key, the client with its own, each checked against the other's
// CACerts and held to the identity rule of certificates in AUTH
// (certProves): the client's certificate must prove its EAP identity,
// the gateway's its IKE identity, as strongSwan's eap-tls does.

// EAPType returns the EAP method of an EAP auth class, 0 for another.
func (a AuthClass) EAPType() message.EAPType {
	switch a {
	case AuthEAPMD5:
		return message.EAPMD5
	case AuthEAPMSCHAPv2:
		return message.EAPMSCHAPv2
	case AuthEAPTLS:
		return message.EAPTLS
	}
	return 0
}

// Mutual reports whether the method of a proves the server to the
// client as well, and leaves an MSK: what EAP-only authentication (RFC
// 5998 §4) allows. EAP-MD5 does neither; what RADIUS runs is not known
// here.
func (a AuthClass) Mutual() bool { return a == AuthEAPMSCHAPv2 || a == AuthEAPTLS }

// newEAPServer returns the method the gateway runs for the peer's
// remote auth.
func (s *SA) newEAPServer() eapMethod {
	if s.cfg.remoteAuth() != AuthEAPTLS {
		return eap.NewServer(eap.ServerConfig{Method: s.cfg.remoteAuth().EAPType(), Secret: s.cfg.EAPSecret, Rand: s.cfg.rand()})
	}
	return eap.NewTLSServer(eap.TLSServerConfig{
		Certificate: tlsCertificate(s.cfg),
		ClientCAs:   certPool(s.cfg.CACerts),
		Rand:        s.cfg.rand(),
		VerifyPeer: func(leaf *x509.Certificate, identity string) error {
			id, err := ParseIdentity(identity)
			if err != nil {
				return fmt.Errorf("EAP identity %q: %v", identity, err)
			}
			if !certProves(leaf, id) {
				return fmt.Errorf(`EAP identity "%s" is neither the subject nor a subjectAltName of the certificate %q`, id, leaf.Subject)
			}
			return nil
		},
	})
}

// newEAPPeer returns the method we run as a client, the gateway being
// server (its IDr).
func (s *SA) newEAPPeer(server Identity) (eapPeer, error) {
	a := s.cfg.localAuth()
	if a == AuthEAPTLS {
		return eap.NewTLSClient(eap.TLSClientConfig{
			Identity:    s.cfg.eapIdentity(),
			Certificate: tlsCertificate(s.cfg),
			RootCAs:     certPool(s.cfg.CACerts),
			VerifyServer: func(leaf *x509.Certificate) error {
				if !certProves(leaf, server) {
					return fmt.Errorf(`the gateway "%s" is neither the subject nor a subjectAltName of its TLS certificate %q`, server, leaf.Subject)
				}
				return nil
			},
		}), nil
	}
	secret, ok := s.cfg.EAPSecret(s.cfg.eapIdentity())
	if !ok {
		return nil, fmt.Errorf("%w: no eap secret for %q", ErrAuthFailed, s.cfg.eapIdentity())
	}
	return eap.NewClient(eap.ClientConfig{
		Identity: s.cfg.eapIdentity(),
		Secret:   secret,
		Methods:  []message.EAPType{a.EAPType()},
		Rand:     s.cfg.rand(),
	}), nil
}

// tlsCertificate is our certificate, its chain and key as crypto/tls
// takes them.
func tlsCertificate(c *Config) tls.Certificate {
	var tc tls.Certificate
	for _, cert := range c.LocalCerts {
		tc.Certificate = append(tc.Certificate, cert.Raw)
	}
	tc.PrivateKey = c.PrivateKey
	if len(c.LocalCerts) > 0 {
		tc.Leaf = c.LocalCerts[0]
	}
	return tc
}
