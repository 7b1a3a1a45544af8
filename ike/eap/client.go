package eap

import (
	"bytes"
	"crypto/md5"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/ipsecd/ipsecd/ike/message"
)

// ClientConfig is what a Client answers with.
type ClientConfig struct {
	Identity string // the EAP identity (swanctl's eap_id)
	// Secret is the password; NewClient copies it and Wipe zeroes the
	// copy.
	Secret []byte
	// Methods are the methods the client runs, in order of preference
	// (what a Nak offers); empty is EAP-MSCHAPv2 only, the one that
	// proves the server and keys AUTH.
	Methods []message.EAPType
	// Rand makes the MSCHAPv2 peer challenge; nil is crypto/rand.
	Rand io.Reader
}

// Client is the client side of one EAP conversation. The zero value is
// not usable: call NewClient.
type Client struct {
	cfg    ClientConfig
	rand   io.Reader
	method message.EAPType // the method run, once a request of one came
	done   bool            // the method finished: EAP-Success is believed
	// authResponse is what the server's MSCHAPv2 Success must carry;
	// msk the key, kept once it did.
	authResponse string
	result       []byte
	msk          []byte
}

// NewClient returns a Client for cfg; it panics on a method it does not
// run (a programmer's mistake: the config admits only these).
func NewClient(cfg ClientConfig) *Client {
	if len(cfg.Methods) == 0 {
		cfg.Methods = []message.EAPType{message.EAPMSCHAPv2}
	}
	for _, m := range cfg.Methods {
		if m != message.EAPMD5 && m != message.EAPMSCHAPv2 {
			panic(fmt.Sprintf("eap: client for %s", MethodName(m)))
		}
	}
	cfg.Secret = bytes.Clone(cfg.Secret)
	return &Client{cfg: cfg, rand: randReader(cfg.Rand)}
}

// MSK returns a copy of the key MSCHAPv2 left once Succeeded; nil for
// MD5 and before.
func (c *Client) MSK() []byte { return append([]byte(nil), c.msk...) }

// Method returns the method the server ran, 0 before one started.
func (c *Client) Method() message.EAPType { return c.method }

// Wipe zeroes the password and the keys the client holds.
func (c *Client) Wipe() {
	clear(c.cfg.Secret)
	clear(c.result)
	clear(c.msk)
}

// Handle takes the server's packet and returns the response to send
// (Continue), or nil with Succeeded once EAP-Success followed a finished
// method, or nil with Failed and why: an AuthError when the server
// refused the password or failed to prove it knows it, one wrapping
// ErrProtocol for a packet that breaks the method (EAP-Success before
// the method finished among them, RFC 3748 §4.2).
func (c *Client) Handle(in []byte) ([]byte, Status, error) {
	out, st, err := c.handle(in)
	if st == Failed {
		c.Wipe()
	}
	return out, st, err
}

func (c *Client) handle(in []byte) ([]byte, Status, error) {
	e, err := parse(in, message.EAPRequest, message.EAPSuccess, message.EAPFailure)
	if err != nil {
		return nil, Failed, err
	}
	switch e.Code() {
	case message.EAPSuccess:
		if !c.done {
			return nil, Failed, protocolError("EAP-Success before %s finished", MethodName(c.method))
		}
		c.msk, c.result = c.result, nil
		return nil, Succeeded, nil
	case message.EAPFailure:
		return nil, Failed, c.authFailed(FailureRejected, "the server sent EAP-Failure")
	}
	id := e.Identifier()
	switch t := e.Type(); {
	case c.done:
		return nil, Failed, protocolError("%s request after the method finished", MethodName(t))
	case t == message.EAPIdentity:
		return message.AppendEAP(nil, message.EAPResponse, id, message.EAPIdentity, []byte(c.cfg.Identity)), Continue, nil
	case t == message.EAPNotification:
		// RFC 3748 §5.2: acknowledged with an empty response.
		return message.AppendEAP(nil, message.EAPResponse, id, message.EAPNotification, nil), Continue, nil
	case c.method != 0 && t != c.method:
		return nil, Failed, protocolError("%s request during %s", MethodName(t), MethodName(c.method))
	case !slices.Contains(c.cfg.Methods, t):
		// A legacy Nak lists the methods we would run (RFC 3748 §5.3.1).
		var want []byte
		for _, m := range c.cfg.Methods {
			want = append(want, byte(m))
		}
		return message.AppendEAP(nil, message.EAPResponse, id, message.EAPNak, want), Continue, nil
	case t == message.EAPMD5:
		c.method = t
		return c.md5(id, e.Data())
	default:
		c.method = t
		return c.mschapv2(id, e.Data())
	}
}

func (c *Client) authFailed(f Failure, reason string) error {
	return &AuthError{Identity: c.cfg.Identity, Method: c.method, Reason: reason, Failure: f}
}

// md5 answers an MD5-Challenge (RFC 1994 §4.1); the method is then done,
// the server unproven (EAP-MD5 is one way).
func (c *Client) md5(id uint8, d []byte) ([]byte, Status, error) {
	if len(d) < 1 || d[0] == 0 || 1+int(d[0]) > len(d) {
		return nil, Failed, protocolError("malformed EAP-MD5 request")
	}
	h := md5.New()
	h.Write([]byte{id})
	h.Write(c.cfg.Secret)
	h.Write(d[1 : 1+int(d[0])])
	resp := append([]byte{md5.Size}, h.Sum(nil)...)
	c.done = true
	return message.AppendEAP(nil, message.EAPResponse, id, message.EAPMD5, resp), Continue, nil
}

// mschapv2 answers a Challenge, and checks a Success request's
// authenticator response before acknowledging it.
func (c *Client) mschapv2(id uint8, d []byte) ([]byte, Status, error) {
	if len(d) < 1 {
		return nil, Failed, protocolError("empty EAP-MSCHAPv2 request")
	}
	switch d[0] {
	case opChallenge:
		if c.authResponse != "" {
			return nil, Failed, protocolError("a second EAP-MSCHAPv2 challenge")
		}
		// OpCode, MS-CHAPv2-ID, MS-Length, Value-Size (16), Challenge, Name.
		if len(d) < msHeaderLen+1+challengeLen || d[msHeaderLen] != challengeLen {
			return nil, Failed, protocolError("malformed EAP-MSCHAPv2 challenge")
		}
		msID := d[1]
		server := d[msHeaderLen+1 : msHeaderLen+1+challengeLen]
		var peer [challengeLen]byte
		if _, err := io.ReadFull(c.rand, peer[:]); err != nil {
			return nil, Failed, fmt.Errorf("eap: %w", err)
		}
		pw := ntPasswordHash(c.cfg.Secret)
		m := derive(&pw, server, peer[:], c.cfg.Identity)
		c.authResponse, c.result = authResponseString(m.authResponse), m.msk
		// Value: Peer-Challenge, 8 reserved, NT-Response, Flags.
		name := []byte(c.cfg.Identity)
		data := appendMS(nil, opResponse, msID, 1+responseValueLen+len(name))
		data = append(append(data, responseValueLen), peer[:]...)
		data = append(append(data, make([]byte, 8)...), m.ntResponse[:]...)
		data = append(append(data, 0), name...)
		return message.AppendEAP(nil, message.EAPResponse, id, message.EAPMSCHAPv2, data), Continue, nil
	case opSuccess:
		// "S=<40 hex> M=<message>" after the MS header.
		if c.authResponse == "" || len(d) < msHeaderLen {
			return nil, Failed, protocolError("EAP-MSCHAPv2 success before a response")
		}
		s, _, _ := strings.Cut(string(d[msHeaderLen:]), " ")
		if !equal([]byte(strings.ToUpper(s)), []byte(c.authResponse)) {
			return nil, Failed, c.authFailed(FailureOther, "the server's authenticator response is wrong: it does not know the password")
		}
		c.done = true
		// The acknowledgement is the OpCode alone.
		return message.AppendEAP(nil, message.EAPResponse, id, message.EAPMSCHAPv2, []byte{opSuccess}), Continue, nil
	case opFailure:
		return nil, Failed, c.authFailed(FailureRejected, fmt.Sprintf("the server refused the password (%.40q)", d[min(msHeaderLen, len(d)):]))
	}
	return nil, Failed, protocolError("unexpected EAP-MSCHAPv2 opcode %d", d[0])
}
