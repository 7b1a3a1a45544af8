package eapradius

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/subtle"
	"errors"
	"fmt"

	"layeh.com/radius"
	"layeh.com/radius/rfc2869"
)

// The RADIUS header (RFC 2865 §3):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Code      |  Identifier   |            Length             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                         Authenticator (16)                    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Attributes ...
const (
	headerLen     = 20
	authenticator = 4 // offset of the Authenticator
	authLen       = md5.Size
	// maxAttrValue is the most an attribute carries (255 less type
	// and length): an EAP packet longer than this is split (RFC 3579
	// §3.1).
	maxAttrValue = 253
)

// ErrMismatch is wrapped by the error of an answer whose Response
// Authenticator or Message-Authenticator does not check out: the shared
// secret differs from the server's, or the answer is forged. The answer
// is dropped and counted, and the request waits on for a genuine one.
var ErrMismatch = errors.New("eapradius: authenticator mismatch (wrong shared secret?)")

// ErrMalformed is wrapped by the error of an answer that breaks RADIUS's
// or RFC 3579's rules; it is dropped and counted like a forged one.
var ErrMalformed = errors.New("eapradius: malformed answer")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// addEAP appends the EAP packet to p as EAP-Message attributes of at
// most 253 bytes each, in order (RFC 3579 §3.1).
func addEAP(p *radius.Packet, eap []byte) {
	for len(eap) > 0 {
		n := min(len(eap), maxAttrValue)
		p.Add(rfc2869.EAPMessage_Type, radius.Attribute(eap[:n:n]))
		eap = eap[n:]
	}
}

// joinEAP returns the EAP-Message attributes of attrs concatenated, nil
// when there are none; the result must be one EAP packet whose Length is
// what was joined (RFC 3579 §3.1).
func joinEAP(attrs radius.Attributes) ([]byte, error) {
	var eap []byte
	for _, a := range attrs {
		if a.Type == rfc2869.EAPMessage_Type {
			eap = append(eap, a.Attribute...)
		}
	}
	if eap == nil {
		return nil, nil
	}
	if len(eap) < 4 || int(eap[2])<<8|int(eap[3]) != len(eap) {
		return nil, malformed("EAP-Message of %d bytes is not one EAP packet", len(eap))
	}
	return eap, nil
}

// encodeRequest returns p on the wire. An Access-Request gets a
// Message-Authenticator (RFC 3579 §3.2: HMAC-MD5 keyed with the secret
// over the packet with the attribute zeroed); its Request Authenticator is
// p.Authenticator, random. An Accounting-Request's authenticator is the
// MD5 of RFC 2866 §3.
func encodeRequest(p *radius.Packet) ([]byte, error) {
	if p.Code == radius.CodeAccessRequest {
		p.Attributes.Del(rfc2869.MessageAuthenticator_Type)
		p.Add(rfc2869.MessageAuthenticator_Type, make(radius.Attribute, authLen))
	}
	b, err := p.Encode()
	if err != nil {
		return nil, fmt.Errorf("eapradius: %w", err)
	}
	if p.Code == radius.CodeAccessRequest {
		at := messageAuthenticatorAt(b)
		mac := hmac.New(md5.New, p.Secret)
		mac.Write(b)
		mac.Sum(b[at:at])
	}
	return b, nil
}

// messageAuthenticatorAt returns the offset of the value of b's first
// Message-Authenticator, -1 without one. b's attributes must be walkable
// (checked by radius.Parse or built by us).
func messageAuthenticatorAt(b []byte) int {
	for i := headerLen; i+2 <= len(b); {
		n := int(b[i+1])
		if n < 2 || i+n > len(b) {
			return -1
		}
		if b[i] == byte(rfc2869.MessageAuthenticator_Type) && n == 2+authLen {
			return i + 2
		}
		i += n
	}
	return -1
}

// verifyAnswer checks b, an answer to the request req (on the wire), with
// the secret, and returns it parsed: the Identifier must be req's, the
// Response Authenticator MD5(Code|ID|Length|RequestAuth|Attributes|Secret)
// (RFC 2865 §3), and an answer to an Access-Request must carry a
// Message-Authenticator that checks out (RFC 3579 §3.2; required on every
// answer, not only those with EAP, as RFC 5080 §2.2.2 and the BlastRADIUS
// fixes ask).
func verifyAnswer(b, req, secret []byte) (*radius.Packet, error) {
	if len(b) < headerLen || len(req) < headerLen {
		return nil, malformed("%d bytes, shorter than the RADIUS header", len(b))
	}
	if n := int(b[2])<<8 | int(b[3]); n < headerLen || n > len(b) || n > radius.MaxPacketLength {
		return nil, malformed("Length %d in %d bytes", n, len(b))
	} else {
		b = b[:n] // RFC 2865 §3: octets past Length are padding
	}
	if b[1] != req[1] {
		return nil, malformed("identifier %d answers none outstanding (%d)", b[1], req[1])
	}
	p, err := radius.Parse(b, secret)
	if err != nil {
		return nil, malformed("%v", err)
	}
	if !wantsAnswer(radius.Code(req[0]), p.Code) {
		return nil, malformed("%v answers a %v", p.Code, radius.Code(req[0]))
	}
	if !radius.IsAuthenticResponse(b, req, secret) {
		return nil, fmt.Errorf("%w: Response Authenticator", ErrMismatch)
	}
	if radius.Code(req[0]) != radius.CodeAccessRequest {
		return p, nil
	}
	at := messageAuthenticatorAt(b)
	if at < 0 {
		return nil, fmt.Errorf("%w: no Message-Authenticator in an %v", ErrMismatch, p.Code)
	}
	// The HMAC covers the answer with the Request Authenticator in its
	// Authenticator field and the Message-Authenticator zeroed.
	c := append([]byte(nil), b...)
	copy(c[authenticator:authenticator+authLen], req[authenticator:authenticator+authLen])
	clear(c[at : at+authLen])
	mac := hmac.New(md5.New, secret)
	mac.Write(c)
	if subtle.ConstantTimeCompare(mac.Sum(nil), b[at:at+authLen]) != 1 {
		return nil, fmt.Errorf("%w: Message-Authenticator", ErrMismatch)
	}
	return p, nil
}

// wantsAnswer says whether an answer of code a may answer a request of
// code q.
func wantsAnswer(q, a radius.Code) bool {
	switch q {
	case radius.CodeAccessRequest:
		return a == radius.CodeAccessAccept || a == radius.CodeAccessReject || a == radius.CodeAccessChallenge
	case radius.CodeAccountingRequest:
		return a == radius.CodeAccountingResponse
	}
	return false
}
