package ike

import (
	"bytes"
	"crypto"
	"crypto/sha1"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/ipsecd/ipsecd/ike/message"
)

// AuthClass is how one side authenticates, as swanctl.conf's local.auth
// and remote.auth write it.
type AuthClass string

const (
	// AuthPSK: the pre-shared key (RFC 7296 §2.15); the default.
	AuthPSK AuthClass = "psk"
	// AuthPubkey: a signature with the key of an X.509 certificate (RFC
	// 7296 §3.8, RFC 7427).
	AuthPubkey AuthClass = "pubkey"
	// AuthEAPMSCHAPv2, AuthEAPMD5 and AuthEAPTLS: EAP in IKE_AUTH (RFC
	// 7296 §2.16, package ike/eap): as remote auth we are the gateway,
	// the peer a road warrior whose user we check (eap.go); as local
	// auth we are that road warrior (eap_client.go). EAP-TLS proves the
	// user with a certificate inside EAP (eap_methods.go).
	AuthEAPMSCHAPv2 AuthClass = "eap-mschapv2"
	AuthEAPMD5      AuthClass = "eap-md5"
	AuthEAPTLS      AuthClass = "eap-tls"
	// AuthEAPRADIUS: EAP relayed to an AAA server, whatever the method
	// (Config.EAPRelay, eaprelay.go).
	AuthEAPRADIUS AuthClass = "eap-radius"
	// AuthEAPOnly: the gateway proves itself by the mutual EAP method
	// alone, without a certificate AUTH (RFC 5998; strongSwan's auth =
	// eap): the gateway's local auth, and the client's remote auth that
	// accepts it (eaponly.go).
	AuthEAPOnly AuthClass = "eap"
)

// IsEAP reports whether a is an EAP method (not AuthEAPOnly, which
// names none).
func (a AuthClass) IsEAP() bool {
	return a == AuthEAPMSCHAPv2 || a == AuthEAPMD5 || a == AuthEAPTLS || a == AuthEAPRADIUS
}

func (c *Config) localAuth() AuthClass {
	if c.LocalAuth == "" {
		return AuthPSK
	}
	return c.LocalAuth
}

func (c *Config) remoteAuth() AuthClass {
	if c.RemoteAuth == "" {
		return AuthPSK
	}
	return c.RemoteAuth
}

func (c *Config) usesPubkey() bool {
	return c.localAuth() == AuthPubkey || c.remoteAuth() == AuthPubkey
}

// validateCerts checks the certificate half of Config.Validate.
func (c *Config) validateCerts() error {
	switch a := c.localAuth(); {
	case a.IsEAP():
		if err := c.validateEAPClient(); err != nil { // eap_client.go
			return err
		}
	case a == AuthEAPOnly:
		if err := c.validateEAPOnly(); err != nil { // eaponly.go
			return err
		}
	case a != AuthPSK && a != AuthPubkey:
		return fmt.Errorf("ike: local auth %q: want psk, pubkey, eap, or an EAP method", a)
	}
	switch a := c.remoteAuth(); {
	case a.IsEAP() && c.localAuth().IsEAP():
		return fmt.Errorf("ike: remote auth %q with local auth %q: one side proves itself with a certificate", a, c.localAuth())
	case a.IsEAP() && c.localAuth() != AuthPubkey && c.localAuth() != AuthEAPOnly:
		return fmt.Errorf("ike: remote auth %q needs local auth pubkey: the gateway proves itself with its certificate before the client sends its password (RFC 7296 §2.16)", a)
	case a.IsEAP() && a != AuthEAPRADIUS && a != AuthEAPTLS && c.EAPSecret == nil:
		return fmt.Errorf("ike: remote auth %q needs the users' secrets (EAPSecret)", a)
	case a == AuthEAPTLS && len(c.CACerts) == 0:
		return errors.New("ike: remote auth eap-tls needs cacerts (the trust anchors of the users' certificates)")
	case a == AuthEAPOnly && !c.localAuth().IsEAP():
		return fmt.Errorf("ike: remote auth eap (the gateway proves itself by EAP alone) needs local auth eap-mschapv2 or eap-tls, not %q", c.localAuth())
	case a != AuthPSK && a != AuthPubkey && a != AuthEAPOnly && !a.IsEAP():
		return fmt.Errorf("ike: remote auth %q: want psk, pubkey, eap-mschapv2, eap-md5, eap-tls, eap-radius or eap", a)
	}
	if c.localAuth() == AuthPubkey || c.localAuth() == AuthEAPTLS || len(c.LocalCerts) > 0 {
		if err := c.validateLocalCert(); err != nil {
			return err
		}
	}
	if c.remoteAuth() == AuthPubkey && len(c.CACerts) == 0 && len(c.PeerCerts) == 0 {
		return errors.New("ike: remote auth pubkey needs cacerts (trust anchors) or certs (the peer's certificate, pinned)")
	}
	return nil
}

// validateLocalCert checks our certificate and key, which sign AUTH
// (local auth pubkey) or prove us in EAP-TLS.
func (c *Config) validateLocalCert() error {
	a := c.localAuth()
	if len(c.LocalCerts) == 0 || c.PrivateKey == nil {
		return fmt.Errorf("ike: local auth %s needs a certificate and its private key", a)
	}
	pub, ok := c.LocalCerts[0].PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(c.PrivateKey.Public()) {
		return errors.New("ike: the private key is not the key of the local certificate")
	}
	if !c.LocalID.IsAny() && a != AuthEAPTLS && !certProves(c.LocalCerts[0], c.LocalID) {
		return fmt.Errorf(`ike: local id "%s" is neither the subject nor a subjectAltName of the local certificate (%s)`, c.LocalID, c.LocalCerts[0].Subject)
	}
	return nil
}

// localIdentity is the identity our ID payload carries: LocalID, or
// with a certificate and no LocalID the certificate's subject (as
// strongSwan). A DN that names the certificate's subject is sent as the
// certificate writes it, so that the peer may compare bytes.
func (c *Config) localIdentity() Identity {
	if c.localAuth() == AuthPubkey && len(c.LocalCerts) > 0 {
		cert := c.LocalCerts[0]
		if c.LocalID.IsAny() || c.LocalID.Type() == message.IDDN && dnEqual([]byte(c.LocalID.data), cert.RawSubject) {
			return NewIdentity(message.IDDN, cert.RawSubject)
		}
	}
	return c.LocalID
}

// CertProves reports whether cert certifies identity id (certProves);
// vici's list-certs selects certificates by subject with it.
func CertProves(cert *x509.Certificate, id Identity) bool { return certProves(cert, id) }

// certProves reports whether cert certifies identity id: a DN equal to
// its subject, or a name, address or e-mail address among its
// subjectAltNames. Names ignore ASCII case only, as Identity.Equal: the
// long s (U+017F) is not the "s" of a certificate's name.
func certProves(cert *x509.Certificate, id Identity) bool {
	d := id.Data()
	switch id.Type() {
	case message.IDDN:
		return dnEqual(d, cert.RawSubject)
	case message.IDFQDN:
		return slices.ContainsFunc(cert.DNSNames, func(n string) bool { return asciiEqualFold(n, string(d)) })
	case message.IDRFC822:
		return slices.ContainsFunc(cert.EmailAddresses, func(n string) bool { return asciiEqualFold(n, string(d)) })
	case message.IDIPv4, message.IDIPv6:
		a, ok := netip.AddrFromSlice(d)
		return ok && slices.ContainsFunc(cert.IPAddresses, func(ip net.IP) bool {
			b, ok := netip.AddrFromSlice(ip)
			return ok && b.Unmap() == a
		})
	}
	return false
}

// keyHash is a CA's hash as CERTREQ carries it: SHA-1 of its DER
// SubjectPublicKeyInfo.
func keyHash(c *x509.Certificate) []byte {
	h := sha1.Sum(c.RawSubjectPublicKeyInfo)
	return h[:]
}

// certReq is our CERTREQ: the hashes of our trust anchors.
func (c *Config) certReq() message.Payload {
	var hs []byte
	for _, ca := range c.CACerts {
		hs = append(hs, keyHash(ca)...)
	}
	return message.Payload{Type: message.TypeCREQ, Body: message.AppendCert(nil, message.CertX509Signature, hs)}
}

// certPayloads are our CERT payloads: our certificate, then the chain
// (the other local certificates) up to the first one whose key the peer's
// CERTREQ names, which it has; without a CERTREQ naming one of them, the
// whole chain.
func (c *Config) certPayloads(peerReq [][]byte) []message.Payload {
	n := len(c.LocalCerts)
	for i, cert := range c.LocalCerts[1:] {
		if slices.ContainsFunc(peerReq, func(h []byte) bool { return bytes.Equal(h, keyHash(cert)) }) {
			n = i + 1
			break
		}
	}
	var ps []message.Payload
	for _, cert := range c.LocalCerts[:n] {
		ps = append(ps, message.Payload{Type: message.TypeCERT, Body: message.AppendCert(nil, message.CertX509Signature, cert.Raw)})
	}
	return ps
}

// parseCertReqs returns the CA hashes of the X.509 CERTREQs among ps.
func parseCertReqs(ps []message.Payload) [][]byte {
	var hs [][]byte
	for _, b := range message.All(ps, message.TypeCREQ) {
		c := message.Cert(b)
		if !c.IsValid() || c.Encoding() != message.CertX509Signature {
			continue
		}
		for d := c.Data(); len(d) >= message.CertReqHashLen; d = d[message.CertReqHashLen:] {
			hs = append(hs, d[:message.CertReqHashLen])
		}
	}
	return hs
}

// verifyPeerCert checks the peer's CERT payloads: the first is its
// certificate, which must chain to one of our CACerts through the others
// and be valid now, and prove the identity id. It returns the
// certificate.
func (s *SA) verifyPeerCert(ps []message.Payload, id Identity) (*x509.Certificate, error) {
	var certs []*x509.Certificate
	for _, b := range message.All(ps, message.TypeCERT) {
		c := message.Cert(b)
		if !c.IsValid() || c.Encoding() != message.CertX509Signature {
			continue
		}
		cert, err := x509.ParseCertificate(c.Data())
		if err != nil {
			return nil, fmt.Errorf("%w: the peer's certificate does not parse: %v", ErrAuthFailed, err)
		}
		certs = append(certs, cert)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf(`%w: "%s" sent no X.509 certificate`, ErrAuthFailed, id)
	}
	leaf := certs[0]
	if err := s.trusted(leaf, certs[1:]); err != nil {
		return nil, fmt.Errorf("%w: certificate %q (serial %x, issuer %q): %v", ErrAuthFailed, leaf.Subject, leaf.SerialNumber, leaf.Issuer, err)
	}
	if !certProves(leaf, id) {
		return nil, fmt.Errorf(`%w: peer claims identity "%s", which its certificate %q does not contain (subject or subjectAltName)`, ErrAuthFailed, id, leaf.Subject)
	}
	return leaf, nil
}

// trusted checks the peer's certificate leaf, with the chain the peer
// sent: pinned (PeerCerts) it must be one of them; it must chain to
// CACerts when there are any, else (pinned alone) be valid now.
func (s *SA) trusted(leaf *x509.Certificate, chain []*x509.Certificate) error {
	if len(s.cfg.PeerCerts) > 0 && !slices.ContainsFunc(s.cfg.PeerCerts, leaf.Equal) {
		return errors.New("not the certificate pinned for this peer (remote certs)")
	}
	if len(s.cfg.CACerts) == 0 {
		if len(s.cfg.PeerCerts) == 0 { // Validate refuses this; never trust nothing
			return errors.New("no trust anchors (cacerts) and no pinned certificate (certs)")
		}
		if s.now.Before(leaf.NotBefore) || s.now.After(leaf.NotAfter) {
			return fmt.Errorf("pinned, and expired or not yet valid (valid from %s to %s)", leaf.NotBefore.UTC(), leaf.NotAfter.UTC())
		}
		return nil
	}
	_, err := leaf.Verify(x509.VerifyOptions{Roots: certPool(s.cfg.CACerts), Intermediates: certPool(chain), CurrentTime: s.now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err
}

// certPool returns certs as a pool: the trust anchors, or the
// intermediates a peer sent, of a certificate check here or in EAP-TLS
// (eap_methods.go).
func certPool(certs []*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}
