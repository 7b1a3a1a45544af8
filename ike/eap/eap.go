package eap

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"

	"github.com/ipsecd/ipsecd/ike/message"
)

// Status says what follows a packet handled.
type Status uint8

const (
	// Continue: send the packet returned and hand over the answer.
	Continue Status = iota
	// Succeeded: the method is done and the peer authenticated; a
	// server's packet returned is the EAP-Success to send, a client's
	// is nil. MSK holds the key, if the method makes one.
	Succeeded
	// Failed: authentication failed; a server's packet returned is the
	// EAP-Failure to send, a client's is nil. The error says why.
	Failed
)

func (s Status) String() string {
	switch s {
	case Continue:
		return "continue"
	case Succeeded:
		return "succeeded"
	}
	return "failed"
}

// ErrAuthFailed is wrapped by the AuthError of a wrong secret, an unknown
// identity, a method the peer refuses, or a server that failed to prove
// itself: answer AUTHENTICATION_FAILED.
var ErrAuthFailed = errors.New("eap: authentication failed")

// ErrProtocol is wrapped by the errors of packets that break the method:
// malformed, out of order, of an unexpected identifier or type.
var ErrProtocol = errors.New("eap: protocol error")

// AuthError is an authentication failure: the identity (the peer's text:
// escape it where shown), the method and why, never a secret; Failure
// says why in a word that counters carry.
type AuthError struct {
	Identity string
	Method   message.EAPType
	Reason   string
	Failure  Failure
}

// Failure classifies an AuthError for counters (ipsecd_ike_eap_failures_total).
// The zero value is FailureOther.
type Failure uint8

const (
	FailureOther         Failure = iota // none of the below: a peer that failed to prove itself, or named another identity
	FailureUnknownUser                  // no secret for the identity
	FailureWrongPassword                // the identity's secret did not check out
	FailureMethodRefused                // the peer refused the method (a Nak)
	FailureTLS                          // EAP-TLS's handshake or certificate failed
	FailureRejected                     // the other end said no: the gateway's EAP-Failure to our client, an AAA server's Access-Reject
	numFailures
)

// String is the failure's label: other, unknown_user, wrong_password,
// method_refused, tls, rejected.
func (f Failure) String() string {
	if f >= numFailures {
		f = FailureOther
	}
	return [...]string{"other", "unknown_user", "wrong_password", "method_refused", "tls", "rejected"}[f]
}

func (e *AuthError) Error() string {
	return fmt.Sprintf("eap: %s of %q failed: %s", MethodName(e.Method), e.Identity, e.Reason)
}

func (e *AuthError) Unwrap() error { return ErrAuthFailed }

func protocolError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...))
}

// MethodName returns the name of an EAP method for logs and errors:
// EAP-MSCHAPv2, EAP-MD5, ..., or EAP(N) for a type without one.
func MethodName(t message.EAPType) string {
	switch t {
	case message.EAPIdentity:
		return "EAP-Identity"
	case message.EAPMD5:
		return "EAP-MD5"
	case message.EAPMSCHAPv2:
		return "EAP-MSCHAPv2"
	case message.EAPTLS:
		return "EAP-TLS"
	}
	return fmt.Sprintf("EAP(%d)", t)
}

// MaxIdentity is the longest EAP identity accepted (RFC 3748 leaves it
// open; strongSwan's MSCHAPv2 takes 255 bytes of a name).
const MaxIdentity = 255

// randReader returns r, or crypto/rand's Reader.
func randReader(r io.Reader) io.Reader {
	if r == nil {
		return rand.Reader
	}
	return r
}

// parse checks that b is a valid EAP packet of one of the codes.
func parse(b []byte, codes ...message.EAPCode) (message.EAP, error) {
	e := message.EAP(b)
	if !e.IsValid() {
		return nil, protocolError("malformed packet (%d bytes)", len(b))
	}
	for _, c := range codes {
		if e.Code() == c {
			return e, nil
		}
	}
	return nil, protocolError("unexpected code %d", e.Code())
}

// startIdentity makes a server's first request, EAP-Identity, with a
// random Identifier, and moves the state from sStart to sIdentity.
func startIdentity(r io.Reader, state *serverState, id *uint8) ([]byte, error) {
	if *state != sStart {
		return nil, protocolError("started twice")
	}
	var b [1]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return nil, fmt.Errorf("eap: %w", err)
	}
	*id, *state = b[0], sIdentity
	return message.AppendEAP(nil, message.EAPRequest, *id, message.EAPIdentity, nil), nil
}

// response checks that in is a response to the request outstanding
// (Identifier id) of a server in state.
func response(in []byte, state serverState, id uint8) (message.EAP, error) {
	if state == sStart || state == sDone {
		return nil, protocolError("no request outstanding")
	}
	e, err := parse(in, message.EAPResponse)
	if err != nil {
		return nil, err
	}
	if e.Identifier() != id {
		return nil, protocolError("response identifier %d, want %d", e.Identifier(), id)
	}
	return e, nil
}
