package ike

import (
	"bytes"
	"crypto"
	"crypto/sha1"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

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
)

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
	for _, a := range []AuthClass{c.localAuth(), c.remoteAuth()} {
		if a != AuthPSK && a != AuthPubkey {
			return fmt.Errorf("ike: auth %q: want psk or pubkey", a)
		}
	}
	if c.localAuth() == AuthPubkey {
		if len(c.LocalCerts) == 0 || c.PrivateKey == nil {
			return errors.New("ike: local auth pubkey needs a certificate and its private key")
		}
		pub, ok := c.LocalCerts[0].PublicKey.(interface{ Equal(crypto.PublicKey) bool })
		if !ok || !pub.Equal(c.PrivateKey.Public()) {
			return errors.New("ike: the private key is not the key of the local certificate")
		}
		if c.LocalID != "" {
			id := encodeID(c.LocalID)
			if !certProves(c.LocalCerts[0], message.ID(id)) {
				return fmt.Errorf("ike: local id %q is neither the subject nor a subjectAltName of the local certificate (%s)", c.LocalID, c.LocalCerts[0].Subject)
			}
		}
	}
	if c.remoteAuth() == AuthPubkey && len(c.CACerts) == 0 {
		return errors.New("ike: remote auth pubkey needs cacerts (trust anchors)")
	}
	return nil
}

// localIDBody is the body of our ID payload: LocalID, or with a
// certificate and no LocalID the certificate's subject (as strongSwan).
// A DN that names the certificate's subject is sent as the certificate
// writes it, so that the peer may compare bytes.
func (c *Config) localIDBody() []byte {
	if c.localAuth() == AuthPubkey {
		cert := c.LocalCerts[0]
		if c.LocalID == "" {
			return message.AppendID(nil, message.IDDN, cert.RawSubject)
		}
		if id := encodeID(c.LocalID); message.ID(id).Type() == message.IDDN && dnEqual(message.ID(id).Data(), cert.RawSubject) {
			return message.AppendID(nil, message.IDDN, cert.RawSubject)
		}
	}
	return encodeID(c.LocalID)
}

// dnAttrs are the attribute names a DN string may use, as strongSwan
// writes them.
var dnAttrs = map[string]asn1.ObjectIdentifier{
	"CN": {2, 5, 4, 3}, "SN": {2, 5, 4, 4}, "SERIALNUMBER": {2, 5, 4, 5}, "C": {2, 5, 4, 6},
	"L": {2, 5, 4, 7}, "ST": {2, 5, 4, 8}, "O": {2, 5, 4, 10}, "OU": {2, 5, 4, 11},
	"T": {2, 5, 4, 12}, "E": {1, 2, 840, 113549, 1, 9, 1}, "EMAIL": {1, 2, 840, 113549, 1, 9, 1},
	"DC": {0, 9, 2342, 19200300, 100, 1, 25}, "UID": {0, 9, 2342, 19200300, 100, 1, 1},
}

// parseDN encodes a distinguished name written "C=CH, O=Example, CN=a"
// (strongSwan's order: the first RDN first) as DER.
func parseDN(s string) ([]byte, bool) {
	var rdns pkix.RDNSequence
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		oid, known := dnAttrs[strings.ToUpper(strings.TrimSpace(k))]
		if !ok || !known {
			return nil, false
		}
		rdns = append(rdns, pkix.RelativeDistinguishedNameSET{{Type: oid, Value: strings.TrimSpace(v)}})
	}
	der, err := asn1.Marshal(rdns)
	return der, err == nil
}

// dnEqual compares two DER DNs by their attributes, so that one written
// as PrintableString equals one written as UTF8String; strings compare
// without case, as strongSwan does.
func dnEqual(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var ra, rb pkix.RDNSequence
	if rest, err := asn1.Unmarshal(a, &ra); err != nil || len(rest) != 0 {
		return false
	}
	if rest, err := asn1.Unmarshal(b, &rb); err != nil || len(rest) != 0 || len(ra) != len(rb) {
		return false
	}
	for i := range ra {
		if len(ra[i]) != len(rb[i]) {
			return false
		}
		for j := range ra[i] {
			x, y := ra[i][j], rb[i][j]
			xs, ok1 := x.Value.(string)
			ys, ok2 := y.Value.(string)
			if !x.Type.Equal(y.Type) || !ok1 || !ok2 || !strings.EqualFold(xs, ys) {
				return false
			}
		}
	}
	return true
}

// formatDN writes a DER DN as strongSwan does: "C=CH, O=Example, CN=a".
func formatDN(der []byte) string {
	var rdns pkix.RDNSequence
	if rest, err := asn1.Unmarshal(der, &rdns); err != nil || len(rest) != 0 {
		return fmt.Sprintf("(bad DN %x)", der)
	}
	var parts []string
	for _, rdn := range rdns {
		for _, a := range rdn {
			name := a.Type.String()
			for k, o := range dnAttrs {
				if o.Equal(a.Type) && k != "EMAIL" && k != "SERIALNUMBER" {
					name = k
				}
			}
			parts = append(parts, fmt.Sprintf("%s=%v", name, a.Value))
		}
	}
	return strings.Join(parts, ", ")
}

// certProves reports whether cert certifies identity id: a DN equal to
// its subject, or a name, address or e-mail address among its
// subjectAltNames.
func certProves(cert *x509.Certificate, id message.ID) bool {
	if !id.IsValid() {
		return false
	}
	d := id.Data()
	switch id.Type() {
	case message.IDDN:
		return dnEqual(d, cert.RawSubject)
	case message.IDFQDN:
		return slices.ContainsFunc(cert.DNSNames, func(n string) bool { return strings.EqualFold(n, string(d)) })
	case message.IDRFC822:
		return slices.ContainsFunc(cert.EmailAddresses, func(n string) bool { return strings.EqualFold(n, string(d)) })
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
func (s *SA) verifyPeerCert(ps []message.Payload, id message.ID) (*x509.Certificate, error) {
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
		return nil, fmt.Errorf("%w: %q sent no X.509 certificate", ErrAuthFailed, formatID(id))
	}
	roots, inter := x509.NewCertPool(), x509.NewCertPool()
	for _, ca := range s.cfg.CACerts {
		roots.AddCert(ca)
	}
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	leaf := certs[0]
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: s.now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("%w: certificate %q (serial %x, issuer %q): %v", ErrAuthFailed, leaf.Subject, leaf.SerialNumber, leaf.Issuer, err)
	}
	if !certProves(leaf, id) {
		return nil, fmt.Errorf("%w: peer claims identity %q, which its certificate %q does not contain (subject or subjectAltName)", ErrAuthFailed, formatID(id), leaf.Subject)
	}
	return leaf, nil
}
