package eapradius

import (
	"crypto/hmac"
	"crypto/md5"
	"io"
	"net"

	"github.com/sirupsen/logrus"
	"layeh.com/radius"
	"layeh.com/radius/rfc2869"

	"github.com/ipsecd/ipsecd/ike/message"
)

func testLogger(w io.Writer) logrus.FieldLogger {
	l := logrus.New()
	l.SetOutput(w)
	return l
}

// signAnswer encodes p as a server answers the request req: a
// Message-Authenticator over the answer with req's authenticator, then
// the Response Authenticator (RFC 3579 §3.2, RFC 2865 §3).
func signAnswer(p *radius.Packet, req []byte, secret []byte) []byte {
	p.Secret = secret
	p.Identifier = req[1]
	copy(p.Authenticator[:], req[4:20])
	p.Attributes.Del(rfc2869.MessageAuthenticator_Type)
	p.Add(rfc2869.MessageAuthenticator_Type, make(radius.Attribute, 16))
	b, err := p.MarshalBinary()
	if err != nil {
		panic(err)
	}
	at := messageAuthenticatorAt(b)
	mac := hmac.New(md5.New, secret)
	mac.Write(b)
	mac.Sum(b[at:at])
	h := md5.New()
	h.Write(b)
	h.Write(secret)
	h.Sum(b[4:4])
	return b
}

// answerWith answers n requests on pc with an Access-Challenge signed
// with secret.
func answerWith(pc net.PacketConn, secret []byte, n int) {
	buf := make([]byte, 4096)
	for range n {
		k, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		p := &radius.Packet{Code: radius.CodeAccessChallenge}
		addEAP(p, message.AppendEAP(nil, message.EAPRequest, 2, message.EAPMSCHAPv2, make([]byte, 30)))
		pc.WriteTo(signAnswer(p, buf[:k], secret), from)
	}
}
