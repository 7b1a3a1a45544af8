package eap

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/ipsecd/ipsecd/ike/message"
)

// TLSClientConfig is what an EAP-TLS client proves itself with and
// checks the server against.
type TLSClientConfig struct {
	Identity    string          // the EAP identity (swanctl's eap_id)
	Certificate tls.Certificate // the client's certificate and key
	RootCAs     *x509.CertPool  // the CAs the server's certificate chains to
	// ServerID, if not "", is a name the server's certificate must hold
	// (its subject, common name or a subjectAltName).
	ServerID string
	// VerifyServer, if set, is asked after the chain verified whether
	// the server's certificate names the server, in place of ServerID's
	// check: the IKE engine passes its own identity rule.
	VerifyServer           func(leaf *x509.Certificate) error
	MinVersion, MaxVersion uint16 // 0 is TLS 1.2 and TLS 1.3
}

// TLSClient is the client side of one EAP-TLS conversation.
type TLSClient struct {
	cfg    TLSClientConfig
	tlsCfg *tls.Config
	pipe   *tlsPipe
	frag   tlsFrag
	keys   tls12Keys
	done   bool // the handshake finished: EAP-Success is believed
	msk    []byte
}

// NewTLSClient returns a TLSClient for cfg.
func NewTLSClient(cfg TLSClientConfig) *TLSClient {
	min := cfg.MinVersion
	if min == 0 {
		min = tls.VersionTLS12
	}
	c := &TLSClient{cfg: cfg}
	c.tlsCfg = &tls.Config{
		// Our certificate whatever CAs the server names, as strongSwan
		// sends its configured one: a server that does not trust it
		// says so, rather than missing a certificate.
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &c.cfg.Certificate, nil },
		MinVersion:           min,
		MaxVersion:           cfg.MaxVersion,
		// The server is checked below against ServerID, which need not
		// be a host name as crypto/tls's check wants.
		InsecureSkipVerify: true,
		VerifyConnection:   c.verifyServer,
		KeyLogWriter:       &c.keys, // TLS 1.2's MSK (tls12msk.go)
	}
	return c
}

func (c *TLSClient) verifyServer(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("no server certificate")
	}
	leaf := cs.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, ic := range cs.PeerCertificates[1:] {
		inter.AddCert(ic)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: c.cfg.RootCAs, Intermediates: inter}); err != nil {
		return err
	}
	if c.cfg.VerifyServer != nil {
		return c.cfg.VerifyServer(leaf)
	}
	if c.cfg.ServerID != "" && !certHasIdentity(leaf, c.cfg.ServerID) {
		return fmt.Errorf("the server's certificate %q does not name %q", leaf.Subject, c.cfg.ServerID)
	}
	return nil
}

// MSK returns a copy of the key once the handshake finished.
func (c *TLSClient) MSK() []byte { return append([]byte(nil), c.msk...) }

// Method returns message.EAPTLS once the server started it, else 0.
func (c *TLSClient) Method() message.EAPType {
	if c.pipe == nil {
		return 0
	}
	return message.EAPTLS
}

// Wipe zeroes the key and ends the TLS goroutine.
func (c *TLSClient) Wipe() {
	clear(c.msk)
	if c.pipe != nil {
		c.pipe.close()
	}
	c.keys.wipe()
}

// Handle takes the server's packet and returns the response to send, as
// Client.Handle.
func (c *TLSClient) Handle(in []byte) ([]byte, Status, error) {
	e, err := parse(in, message.EAPRequest, message.EAPSuccess, message.EAPFailure)
	if err != nil {
		c.Wipe()
		return nil, Failed, err
	}
	switch e.Code() {
	case message.EAPSuccess:
		if !c.done {
			c.Wipe()
			return nil, Failed, protocolError("EAP-Success before EAP-TLS finished")
		}
		c.pipe.close()
		return nil, Succeeded, nil
	case message.EAPFailure:
		c.Wipe()
		return nil, Failed, &AuthError{Identity: c.cfg.Identity, Method: message.EAPTLS, Reason: "the server sent EAP-Failure", Failure: FailureRejected}
	}
	switch e.Type() {
	case message.EAPIdentity:
		return message.AppendEAP(nil, message.EAPResponse, e.Identifier(), message.EAPIdentity, []byte(c.cfg.Identity)), Continue, nil
	case message.EAPTLS:
	default:
		return message.AppendEAP(nil, message.EAPResponse, e.Identifier(), message.EAPNak, []byte{byte(message.EAPTLS)}), Continue, nil
	}
	out, err := c.tlsRequest(e.Data())
	if err != nil {
		c.Wipe()
		return nil, Failed, err
	}
	return message.AppendEAP(nil, message.EAPResponse, e.Identifier(), message.EAPTLS, out), Continue, nil
}

// tlsRequest returns the Type-Data answering an EAP-TLS request's.
func (c *TLSClient) tlsRequest(d []byte) ([]byte, error) {
	if c.pipe == nil {
		if len(d) < 1 || d[0]&tlsFlagStart == 0 {
			return nil, protocolError("EAP-TLS request before Start")
		}
		c.pipe = newTLSPipe(tlsClientConn(c.tlsCfg), tlsClientRun)
		out, _, err := c.pipe.step(nil)
		if err != nil {
			return nil, c.authFailed(err)
		}
		c.frag.send = out
		return c.frag.next(), nil
	}
	if c.frag.sending() {
		if !isAck(d) {
			return nil, protocolError("EAP-TLS data while a message is being sent")
		}
		return c.frag.next(), nil
	}
	if c.done {
		return nil, protocolError("EAP-TLS request after the handshake")
	}
	msg, ack, err := c.frag.receive(d)
	if err != nil {
		return nil, err
	}
	if ack {
		return []byte{0}, nil
	}
	c.keys.observe(msg)
	out, finished, err := c.pipe.step(msg)
	if err != nil {
		return nil, c.authFailed(err)
	}
	if finished {
		if c.msk, err = tlsMSK(c.pipe.conn.ConnectionState(), &c.keys); err != nil {
			return nil, err
		}
		c.done = true
	}
	if len(out) == 0 {
		if !finished {
			return nil, protocolError("EAP-TLS message TLS makes nothing of")
		}
		return []byte{0}, nil
	}
	c.frag.send = out
	return c.frag.next(), nil
}

func (c *TLSClient) authFailed(err error) error {
	return &AuthError{Identity: c.cfg.Identity, Method: message.EAPTLS, Reason: "TLS: " + err.Error(), Failure: FailureTLS}
}
