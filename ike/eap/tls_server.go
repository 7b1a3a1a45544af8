package eap

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"

	"github.com/ipsecd/ipsecd/ike/message"
)

// TLSServerConfig is what an EAP-TLS server proves itself with and
// checks clients against.
type TLSServerConfig struct {
	Certificate tls.Certificate // the gateway's certificate and key
	ClientCAs   *x509.CertPool  // the CAs a client's certificate chains to
	// EAPID, if not "" or "%any", is the identity the client's
	// certificate must name (swanctl's eap_id).
	EAPID string
	// MinVersion and MaxVersion bound the TLS version; 0 is TLS 1.2 and
	// TLS 1.3.
	MinVersion, MaxVersion uint16
	Rand                   io.Reader // nil is crypto/rand
	// VerifyPeer, if set, decides whether the client's certificate (its
	// chain already verified) proves the EAP identity it gave, in place
	// of the names check of EAPID: the IKE engine passes its own
	// identity rule, the one certificates in AUTH are held to. An error
	// fails the conversation; the identity stays the one given.
	VerifyPeer func(leaf *x509.Certificate, identity string) error
}

// TLSServer is the server side of one EAP-TLS conversation (RFC 5216,
// RFC 9190): EAP-Identity, EAP-TLS Start, the handshake in fragments of
// TLSFragmentSize, EAP-Success once the client's certificate verified.
type TLSServer struct {
	cfg      TLSServerConfig
	tlsCfg   *tls.Config
	rand     io.Reader
	id       uint8
	state    serverState // sIdentity, sMethod, sSuccessSent (the last flight sent), sDone
	identity string
	pipe     *tlsPipe
	frag     tlsFrag
	keys     tls12Keys
	msk      []byte
}

// NewTLSServer returns a TLSServer for cfg.
func NewTLSServer(cfg TLSServerConfig) *TLSServer {
	min := cfg.MinVersion
	if min == 0 {
		min = tls.VersionTLS12
	}
	s := &TLSServer{cfg: cfg, rand: randReader(cfg.Rand)}
	s.tlsCfg = &tls.Config{
		Certificates:           []tls.Certificate{cfg.Certificate},
		ClientAuth:             tls.RequireAndVerifyClientCert,
		ClientCAs:              cfg.ClientCAs,
		MinVersion:             min,
		MaxVersion:             cfg.MaxVersion,
		SessionTicketsDisabled: true, // RFC 9190 §2.1.2: no resumption here
		Rand:                   cfg.Rand,
		KeyLogWriter:           &s.keys, // TLS 1.2's MSK (tls12msk.go)
	}
	return s
}

// Start returns EAP-Identity, with a random Identifier.
func (s *TLSServer) Start() ([]byte, error) {
	return startIdentity(s.rand, &s.state, &s.id)
}

// Identity returns the identity authenticated once Succeeded: the EAP
// identity if the client's certificate names it, else the certificate's
// subject; before, the EAP identity the peer gave.
func (s *TLSServer) Identity() string { return s.identity }

// Method returns message.EAPTLS.
func (s *TLSServer) Method() message.EAPType { return message.EAPTLS }

// MSK returns a copy of the key once Succeeded.
func (s *TLSServer) MSK() []byte { return append([]byte(nil), s.msk...) }

// Wipe zeroes the key and ends the TLS goroutine.
func (s *TLSServer) Wipe() {
	clear(s.msk)
	if s.pipe != nil {
		s.pipe.close()
	}
	s.keys.wipe()
}

// Handle takes the peer's response and returns the packet to send and
// what follows, as Server.Handle.
func (s *TLSServer) Handle(in []byte) ([]byte, Status, error) {
	out, st, err := s.handle(in)
	switch st {
	case Failed:
		s.state = sDone
		s.Wipe()
		return message.AppendEAPResult(nil, message.EAPFailure, s.id), Failed, err
	case Succeeded:
		s.state = sDone
		s.pipe.close()
		return message.AppendEAPResult(nil, message.EAPSuccess, s.id), Succeeded, nil
	}
	s.id++
	return message.AppendEAP(nil, message.EAPRequest, s.id, message.EAPTLS, out), Continue, nil
}

// handle returns the Type-Data of the next EAP-TLS request.
func (s *TLSServer) handle(in []byte) ([]byte, Status, error) {
	e, err := response(in, s.state, s.id)
	if err != nil {
		return nil, Failed, err
	}
	switch {
	case s.state == sIdentity && e.Type() == message.EAPIdentity:
		if len(e.Data()) == 0 || len(e.Data()) > MaxIdentity {
			return nil, Failed, protocolError("identity of %d bytes; want 1..%d", len(e.Data()), MaxIdentity)
		}
		s.identity = string(e.Data())
		s.state = sMethod
		s.pipe = newTLSPipe(tlsServerConn(s.tlsCfg), tlsServerRun)
		if _, _, err := s.pipe.step(nil); err != nil {
			return nil, Failed, s.authFailed(err)
		}
		return []byte{tlsFlagStart}, Continue, nil
	case s.state != sIdentity && e.Type() == message.EAPNak:
		return nil, Failed, &AuthError{Identity: s.identity, Method: message.EAPTLS, Reason: "the peer refuses the method (" + nakList(e.Data()) + ")", Failure: FailureMethodRefused}
	case s.state == sIdentity || e.Type() != message.EAPTLS:
		return nil, Failed, protocolError("unexpected %s response", MethodName(e.Type()))
	}
	d := e.Data()
	if s.frag.sending() || s.state == sSuccessSent {
		if !isAck(d) {
			return nil, Failed, protocolError("EAP-TLS data while a message is being sent")
		}
		if s.frag.sending() {
			return s.frag.next(), Continue, nil
		}
		return nil, Succeeded, nil
	}
	msg, ack, err := s.frag.receive(d)
	if err != nil {
		return nil, Failed, err
	}
	if ack {
		return []byte{0}, Continue, nil
	}
	out, finished, err := s.pipe.step(msg)
	s.keys.observe(out)
	if err != nil {
		return nil, Failed, s.authFailed(err)
	}
	if finished {
		if err := s.finish(); err != nil {
			return nil, Failed, err
		}
		if len(out) == 0 {
			return nil, Succeeded, nil
		}
		s.state = sSuccessSent
	} else if len(out) == 0 {
		return nil, Failed, protocolError("EAP-TLS message TLS makes nothing of")
	}
	s.frag.send = out
	return s.frag.next(), Continue, nil
}

// finish checks the identity and keeps the MSK of a finished handshake.
func (s *TLSServer) finish() error {
	cs := s.pipe.conn.ConnectionState()
	if len(cs.PeerCertificates) == 0 {
		return s.authFailed(fmt.Errorf("no client certificate"))
	}
	leaf := cs.PeerCertificates[0]
	if s.cfg.VerifyPeer != nil {
		if err := s.cfg.VerifyPeer(leaf, s.identity); err != nil {
			return s.authFailed(err)
		}
	} else if id := s.cfg.EAPID; id != "" && id != "%any" && !certHasIdentity(leaf, id) {
		return s.authFailed(fmt.Errorf("the certificate %q does not name %q", leaf.Subject, id))
	}
	if s.cfg.VerifyPeer == nil && !certHasIdentity(leaf, s.identity) {
		s.identity = leaf.Subject.String()
	}
	msk, err := tlsMSK(cs, &s.keys)
	if err != nil {
		return err
	}
	s.msk = msk
	return nil
}

func (s *TLSServer) authFailed(err error) error {
	return &AuthError{Identity: s.identity, Method: message.EAPTLS, Reason: "TLS: " + err.Error(), Failure: FailureTLS}
}
