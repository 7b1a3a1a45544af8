package eap

import (
	"crypto/md5"
	"fmt"
	"io"
	"strings"

	"github.com/ipsecd/ipsecd/ike/message"
)

// ServerConfig is what a Server checks peers against.
type ServerConfig struct {
	// Method is the method the server runs after EAP-Identity:
	// message.EAPMD5 or message.EAPMSCHAPv2.
	Method message.EAPType
	// Secret returns the secret of an EAP identity, false for an
	// identity it does not know. The Server reads the bytes during the
	// call that needs them and keeps no reference.
	Secret func(identity string) ([]byte, bool)
	// Rand makes challenges and identifiers; nil is crypto/rand.
	Rand io.Reader
	// Name is the authenticator's name in an MSCHAPv2 Challenge; "" is
	// "ipsecd".
	Name string
}

// Server is the server side of one EAP conversation: EAP-Identity, then
// the configured method. The zero value is not usable: call NewServer.
type Server struct {
	cfg      ServerConfig
	rand     io.Reader
	id       uint8 // the Identifier of the request outstanding
	state    serverState
	identity string
	// challenge is the method's challenge outstanding; result the
	// MSCHAPv2 values for the Success request, kept until the peer
	// acknowledges it.
	challenge [challengeLen]byte
	result    mschapv2
	msk       []byte
}

type serverState uint8

const (
	sStart       serverState = iota
	sIdentity                // EAP-Identity asked
	sMethod                  // the method's challenge asked
	sSuccessSent             // MSCHAPv2 Success request sent, its response awaited
	sDone
)

// NewServer returns a Server for cfg; it panics on a method it does not
// run (a programmer's mistake: the config admits only these).
func NewServer(cfg ServerConfig) *Server {
	if cfg.Method != message.EAPMD5 && cfg.Method != message.EAPMSCHAPv2 {
		panic(fmt.Sprintf("eap: server for %s", MethodName(cfg.Method)))
	}
	if cfg.Name == "" {
		cfg.Name = "ipsecd"
	}
	return &Server{cfg: cfg, rand: randReader(cfg.Rand)}
}

// Start returns the first request: EAP-Identity, with a random
// Identifier.
func (s *Server) Start() ([]byte, error) {
	return startIdentity(s.rand, &s.state, &s.id)
}

// Identity returns the EAP identity the peer gave, "" before it did.
// It is the peer's text: escape it where shown.
func (s *Server) Identity() string { return s.identity }

// Method returns the method the server runs.
func (s *Server) Method() message.EAPType { return s.cfg.Method }

// MSK returns a copy of the key MSCHAPv2 left once Succeeded; nil for
// MD5, which makes none, and before.
func (s *Server) MSK() []byte { return append([]byte(nil), s.msk...) }

// Wipe zeroes the keys and challenges the server holds.
func (s *Server) Wipe() {
	clear(s.msk)
	clear(s.result.msk)
	s.result = mschapv2{}
	s.challenge = [challengeLen]byte{}
}

// Handle takes the peer's response and returns the packet to send and
// what follows (Status). Failed comes with an EAP-Failure to send and an
// error: an AuthError for a wrong secret, an unknown identity or a method
// the peer refuses, else one wrapping ErrProtocol. After Succeeded or
// Failed the conversation is over.
func (s *Server) Handle(in []byte) ([]byte, Status, error) {
	out, st, err := s.handle(in)
	if st == Failed {
		s.state = sDone
		s.Wipe()
		return message.AppendEAPResult(nil, message.EAPFailure, s.id), Failed, err
	}
	return out, st, err
}

func (s *Server) handle(in []byte) ([]byte, Status, error) {
	e, err := response(in, s.state, s.id)
	if err != nil {
		return nil, Failed, err
	}
	switch {
	case e.Type() == message.EAPNak && s.state == sMethod:
		return nil, Failed, &AuthError{Identity: s.identity, Method: s.cfg.Method, Reason: "the peer refuses the method (" + nakList(e.Data()) + ")", Failure: FailureMethodRefused}
	case s.state == sIdentity && e.Type() == message.EAPIdentity:
		return s.identityResponse(e.Data())
	case s.state != sIdentity && e.Type() == s.cfg.Method && s.cfg.Method == message.EAPMD5:
		return s.md5Response(e)
	case s.state != sIdentity && e.Type() == s.cfg.Method:
		return s.mschapv2Response(e)
	}
	return nil, Failed, protocolError("unexpected %s response", MethodName(e.Type()))
}

// nakList names the methods a Nak asks for.
func nakList(data []byte) string {
	var names []string
	for _, t := range data {
		names = append(names, MethodName(message.EAPType(t)))
	}
	if len(names) == 0 {
		return "it wants none"
	}
	return "it wants " + strings.Join(names, ", ")
}

// identityResponse takes the identity and asks the method's challenge.
func (s *Server) identityResponse(id []byte) ([]byte, Status, error) {
	if len(id) == 0 || len(id) > MaxIdentity {
		return nil, Failed, protocolError("identity of %d bytes; want 1..%d", len(id), MaxIdentity)
	}
	s.identity = string(id)
	if _, err := io.ReadFull(s.rand, s.challenge[:]); err != nil {
		return nil, Failed, fmt.Errorf("eap: %w", err)
	}
	s.id++
	s.state = sMethod
	if s.cfg.Method == message.EAPMD5 {
		// Value-Size, Value (RFC 1994 §4.1); no Name.
		data := append([]byte{challengeLen}, s.challenge[:]...)
		return message.AppendEAP(nil, message.EAPRequest, s.id, message.EAPMD5, data), Continue, nil
	}
	// OpCode, MS-CHAPv2-ID, MS-Length, Value-Size, Challenge, Name.
	name := []byte(s.cfg.Name)
	data := appendMS(nil, opChallenge, s.id, 1+challengeLen+len(name))
	data = append(append(append(data, challengeLen), s.challenge[:]...), name...)
	return message.AppendEAP(nil, message.EAPRequest, s.id, message.EAPMSCHAPv2, data), Continue, nil
}

// secret returns the identity's secret, or for an unknown identity
// random bytes and false, so that the peer sees the same computation
// and the same failure either way.
func (s *Server) secret() ([]byte, bool) {
	if s.cfg.Secret != nil {
		if k, ok := s.cfg.Secret(s.identity); ok {
			return k, true
		}
	}
	k := make([]byte, 16)
	io.ReadFull(s.rand, k)
	return k, false
}

// md5Response checks MD5(Identifier | secret | challenge) (RFC 1994 §4.1).
func (s *Server) md5Response(e message.EAP) ([]byte, Status, error) {
	d := e.Data()
	if s.state != sMethod || len(d) < 1+md5.Size || d[0] != md5.Size {
		return nil, Failed, protocolError("malformed EAP-MD5 response")
	}
	k, known := s.secret()
	h := md5.New()
	h.Write([]byte{s.id})
	h.Write(k)
	h.Write(s.challenge[:])
	ok := equal(h.Sum(nil), d[1:1+md5.Size])
	if !known {
		clear(k)
		return nil, Failed, s.authFailed(FailureUnknownUser, "unknown identity")
	}
	if !ok {
		return nil, Failed, s.authFailed(FailureWrongPassword, "wrong secret")
	}
	s.state = sDone
	return message.AppendEAPResult(nil, message.EAPSuccess, s.id), Succeeded, nil
}

func (s *Server) authFailed(f Failure, reason string) error {
	return &AuthError{Identity: s.identity, Method: s.cfg.Method, Reason: reason, Failure: f}
}

// mschapv2Response checks a Response (sMethod) or takes the peer's
// acknowledgement of the Success request (sSuccessSent).
func (s *Server) mschapv2Response(e message.EAP) ([]byte, Status, error) {
	d := e.Data()
	if len(d) < 1 {
		return nil, Failed, protocolError("empty EAP-MSCHAPv2 response")
	}
	switch {
	case s.state == sSuccessSent && d[0] == opSuccess:
		s.state = sDone
		s.msk, s.result.msk = s.result.msk, nil
		return message.AppendEAPResult(nil, message.EAPSuccess, s.id), Succeeded, nil
	case s.state == sSuccessSent && d[0] == opFailure:
		return nil, Failed, s.authFailed(FailureOther, "the peer refused our authenticator response")
	case s.state != sMethod || d[0] != opResponse:
		return nil, Failed, protocolError("unexpected EAP-MSCHAPv2 opcode %d", d[0])
	}
	// OpCode, MS-CHAPv2-ID, MS-Length, Value-Size (49), Value, Name.
	const valueAt = msHeaderLen + 1
	if len(d) < valueAt+responseValueLen || d[msHeaderLen] != responseValueLen || d[1] != s.id {
		return nil, Failed, protocolError("malformed EAP-MSCHAPv2 response")
	}
	value := d[valueAt : valueAt+responseValueLen]
	name := string(d[valueAt+responseValueLen:])
	if name != s.identity {
		// The password checked must be the identity's that leases
		// and logs name.
		return nil, Failed, s.authFailed(FailureOther, fmt.Sprintf("the response names %q, not the EAP identity", name))
	}
	k, known := s.secret()
	pw := ntPasswordHash(k)
	if !known {
		clear(k) // ours; a known secret is the caller's
	}
	m := derive(&pw, s.challenge[:], value[:challengeLen], name)
	ok := equal(m.ntResponse[:], value[challengeLen+8:challengeLen+8+ntResponseLen])
	if !known || !ok {
		clear(m.msk)
		if !known {
			return nil, Failed, s.authFailed(FailureUnknownUser, "unknown identity")
		}
		return nil, Failed, s.authFailed(FailureWrongPassword, "wrong password")
	}
	s.result = m
	s.id++
	s.state = sSuccessSent
	msg := authResponseString(m.authResponse) + " M=Welcome"
	data := appendMS(nil, opSuccess, s.id-1, len(msg))
	data = append(data, msg...)
	return message.AppendEAP(nil, message.EAPRequest, s.id, message.EAPMSCHAPv2, data), Continue, nil
}
