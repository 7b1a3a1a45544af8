package eapradius

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync"

	"layeh.com/radius"
	"layeh.com/radius/rfc2865"

	"github.com/ipsecd/ipsecd/ike/eap"
	"github.com/ipsecd/ipsecd/ike/message"
)

// Peer is what a request says about the client being authenticated
// (strongSwan's eap-radius sends the same).
type Peer struct {
	// NASPort numbers the session on this gateway (the IKE SA's unique
	// id), so that accounting and the server's logs can tell sessions
	// of one user apart.
	NASPort uint32
	// Calling is the client's address and Called the gateway's: the
	// Calling-Station-Id and Called-Station-Id (RFC 2865 §5.30, §5.31).
	Calling, Called netip.AddrPort
}

// Step is the outcome of one EAP packet relayed: as eap.Server's Handle
// returns, delivered to the callback given to Conversation.Handle.
type Step struct {
	// Packet is the EAP packet to send to the client: the server's next
	// request (Continue), EAP-Success (Succeeded), EAP-Failure (Failed).
	Packet []byte
	Status eap.Status
	// Err says why it Failed: an *eap.AuthError for an Access-Reject,
	// one wrapping ErrNoAnswer when no server answered, ErrProtocol or
	// ErrMalformed for packets that break the conversation.
	Err error
}

// Conversation relays one client's EAP conversation to RADIUS in the
// shape of eap.Server, asynchronously: Start returns the EAP-Identity
// request; Handle takes each response the client sends and calls back
// with what to send it next, from another goroutine, once a server
// answered (after Timeout×Tries per server at most). The server that
// answers the first request answers them all, since its State ties the
// conversation to it. Not safe for concurrent use; one Handle at a time.
type Conversation struct {
	client *Client
	peer   Peer
	// mu guards what the callback sets and the caller reads.
	mu       sync.Mutex
	id       uint8  // the Identifier of the last request to the client, which an EAP-Success or -Failure of ours takes (RFC 3748 §4.2)
	identity string // the client's EAP identity, the User-Name
	method   message.EAPType
	state    []byte  // the server's State, echoed (RFC 2865 §5.24)
	srv      *server // the server of this conversation once it answered
	busy     bool
	done     bool
	accept   *Accept
}

// NewConversation returns a conversation for the client peer.
func (c *Client) NewConversation(peer Peer) *Conversation {
	return &Conversation{client: c, peer: peer}
}

// Start returns the first request: EAP-Identity, with a random
// Identifier, asked by the gateway itself as strongSwan does (eap_start
// no), so that no server is asked before the client said who it is.
func (cv *Conversation) Start() ([]byte, error) {
	var b [1]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("eapradius: %w", err)
	}
	cv.mu.Lock()
	defer cv.mu.Unlock()
	cv.id = b[0]
	return message.AppendEAP(nil, message.EAPRequest, cv.id, message.EAPIdentity, nil), nil
}

// Identity returns the client's EAP identity, "" before it gave one.
// It is the peer's text: escape it where shown.
func (cv *Conversation) Identity() string {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	return cv.identity
}

// Method returns the EAP method the client answered the server's
// requests with (the last that was not a Nak), 0 before it did.
func (cv *Conversation) Method() message.EAPType {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	return cv.method
}

// Accept returns what the Access-Accept granted once Succeeded, nil
// before or after a failure.
func (cv *Conversation) Accept() *Accept {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	return cv.accept
}

// MSK returns a copy of the key from the Access-Accept once Succeeded;
// nil before, or when the server sent none.
func (cv *Conversation) MSK() []byte {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	if cv.accept == nil {
		return nil
	}
	return append([]byte(nil), cv.accept.MSK...)
}

// Wipe zeroes the MSK held.
func (cv *Conversation) Wipe() {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	if cv.accept != nil {
		cv.accept.Wipe()
	}
}

// Handle relays the client's EAP response in to the server, and calls
// done once with the Step that follows, from a goroutine of the Client
// (the caller hands it to its own loop). A packet that is no response,
// or a Handle while one is outstanding or after the end, fails at once
// (done is called before Handle returns).
func (cv *Conversation) Handle(in []byte, done func(Step)) {
	p, err := cv.request(in)
	if err != nil {
		done(cv.fail(err))
		return
	}
	cv.mu.Lock()
	srv := cv.srv
	cv.mu.Unlock()
	cv.client.exchange(p, srv, func(a answer) { done(cv.answered(a)) })
}

// request checks the client's response and builds the Access-Request
// that carries it.
func (cv *Conversation) request(in []byte) (*radius.Packet, error) {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	if cv.busy || cv.done {
		return nil, fmt.Errorf("%w: a response while none is asked", eap.ErrProtocol)
	}
	e := message.EAP(in)
	if !e.IsValid() || e.Code() != message.EAPResponse {
		return nil, fmt.Errorf("%w: not an EAP response (%d bytes)", eap.ErrProtocol, len(in))
	}
	if cv.identity == "" {
		if e.Type() != message.EAPIdentity || e.Identifier() != cv.id {
			return nil, fmt.Errorf("%w: want the EAP-Identity response first", eap.ErrProtocol)
		}
		if d := e.Data(); len(d) == 0 || len(d) > eap.MaxIdentity {
			return nil, fmt.Errorf("%w: identity of %d bytes; want 1..%d", eap.ErrProtocol, len(d), eap.MaxIdentity)
		}
		cv.identity = string(e.Data())
	} else if e.Type() != message.EAPNak {
		cv.method = e.Type()
	}
	p := radius.New(radius.CodeAccessRequest, nil)
	p.Add(rfc2865.UserName_Type, radius.Attribute(cv.identity))
	p.Add(rfc2865.ServiceType_Type, uint32Attr(uint32(rfc2865.ServiceType_Value_FramedUser)))
	p.Add(rfc2865.NASPortType_Type, uint32Attr(uint32(rfc2865.NASPortType_Value_Virtual)))
	p.Add(rfc2865.NASPort_Type, uint32Attr(cv.peer.NASPort))
	p.Add(rfc2865.NASIdentifier_Type, radius.Attribute(cv.client.cfg.NASIdentifier))
	addStation(p, rfc2865.CalledStationID_Type, cv.peer.Called)
	addStation(p, rfc2865.CallingStationID_Type, cv.peer.Calling)
	addNASAddr(p, cv.client.nasAddr(cv.peer.Called.Addr()))
	addEAP(p, in)
	if cv.state != nil {
		p.Add(rfc2865.State_Type, radius.Attribute(cv.state))
	}
	cv.busy = true
	return p, nil
}

// answered turns the server's answer into the Step for the client.
func (cv *Conversation) answered(a answer) Step {
	if a.err != nil {
		return cv.fail(a.err)
	}
	eapIn, err := joinEAP(a.p.Attributes)
	if err != nil {
		return cv.fail(err)
	}
	cv.mu.Lock()
	cv.srv = a.srv
	cv.state = append([]byte(nil), rfc2865.State_Get(a.p)...)
	cv.mu.Unlock()
	switch a.p.Code {
	case radius.CodeAccessChallenge:
		if eapIn == nil || message.EAP(eapIn).Code() != message.EAPRequest || !message.EAP(eapIn).IsValid() {
			return cv.fail(malformed("Access-Challenge without an EAP request"))
		}
		cv.mu.Lock()
		cv.busy, cv.id = false, message.EAP(eapIn).Identifier()
		cv.mu.Unlock()
		return Step{Packet: eapIn, Status: eap.Continue}
	case radius.CodeAccessAccept:
		acc, err := parseAccept(a.p, a.req[authenticator:authenticator+authLen])
		if err != nil {
			return cv.fail(err)
		}
		cv.mu.Lock()
		cv.accept, cv.done, cv.busy = acc, true, false
		id := cv.id
		cv.mu.Unlock()
		if eapIn == nil || message.EAP(eapIn).Code() != message.EAPSuccess {
			// An Accept without its EAP-Success (RFC 3579 §2.6.3
			// allows none): the gateway says it.
			eapIn = message.AppendEAPResult(nil, message.EAPSuccess, id)
		}
		return Step{Packet: eapIn, Status: eap.Succeeded}
	}
	reason := "the RADIUS server sent Access-Reject"
	if m := rfc2865.ReplyMessage_GetString(a.p); m != "" {
		reason += fmt.Sprintf(" (%q)", m)
	}
	cv.mu.Lock()
	authErr := &eap.AuthError{Identity: cv.identity, Method: cv.method, Reason: reason, Failure: eap.FailureRejected}
	cv.mu.Unlock()
	st := cv.fail(authErr)
	if eapIn != nil && message.EAP(eapIn).Code() == message.EAPFailure {
		st.Packet = eapIn
	}
	return st
}

// fail ends the conversation with an EAP-Failure and err.
func (cv *Conversation) fail(err error) Step {
	cv.mu.Lock()
	cv.done, cv.busy = true, false
	if cv.accept != nil {
		cv.accept.Wipe()
		cv.accept = nil
	}
	id := cv.id
	cv.mu.Unlock()
	return Step{Packet: message.AppendEAPResult(nil, message.EAPFailure, id), Status: eap.Failed, Err: err}
}

func uint32Attr(v uint32) radius.Attribute {
	return binary.BigEndian.AppendUint32(nil, v)
}

// addStation adds a Called- or Calling-Station-Id as strongSwan writes
// them: "address[port]".
func addStation(p *radius.Packet, t radius.Type, ap netip.AddrPort) {
	if ap.IsValid() {
		p.Add(t, radius.Attribute(fmt.Sprintf("%s[%d]", ap.Addr().Unmap(), ap.Port())))
	}
}

// addNASAddr adds NAS-IP-Address or NAS-IPv6-Address (RFC 3162 §2.1).
func addNASAddr(p *radius.Packet, ip netip.Addr) {
	switch ip = ip.Unmap(); {
	case ip.Is4():
		p.Add(rfc2865.NASIPAddress_Type, radius.Attribute(ip.AsSlice()))
	case ip.Is6():
		p.Add(nasIPv6AddressType, radius.Attribute(ip.AsSlice()))
	}
}

// nasIPv6AddressType is RFC 3162's NAS-IPv6-Address.
const nasIPv6AddressType radius.Type = 95
