package ike

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/ipsecd/ipsecd/ike/message"
)

// NATTPort is the port IKE moves to, on both sides, once NAT detection
// saw a NAT (RFC 7296 §2.23); messages there follow a 4-byte non-ESP
// marker (RFC 3948), which the caller strips and adds.
const NATTPort = 4500

// Addrs returns the addresses the SA talks between: where to send its
// requests and retransmissions. After a NAT was detected the ports are
// NATTPort.
func (s *SA) Addrs() (local, remote netip.AddrPort) { return s.local, s.remote }

// Handle is HandleFrom with the SA's current addresses.
func (s *SA) Handle(raw []byte, now time.Time) ([]byte, error) {
	return s.HandleFrom(raw, s.local, s.remote, now)
}

// HandleFrom processes one message from the peer that arrived at local
// from remote, and returns the message to send back (to remote, from
// local), if any. A message that authenticates moves the SA to its
// addresses when a NAT was detected (the peer's mapping may change,
// §2.23). A dropped message gives an error wrapping ErrDropped and
// changes nothing. Any other error says why an exchange failed; the SA
// itself failed only when State is StateFailed (then Err says the same).
// An error may come with a message to send (a notify refusing the
// request). Events say what changed; read them with TakeEvents.
func (s *SA) HandleFrom(raw []byte, local, remote netip.AddrPort, now time.Time) ([]byte, error) {
	m, err := message.Parse(raw)
	if err != nil {
		return nil, dropped("%v", err)
	}
	s.now = now
	defer s.wipeEnded()
	if s.state == StateFailed || s.state == StateDeleted && s.pending == nil {
		// Only our last answer is still given, to a retransmission of
		// the request that ended the SA (its answer may have been lost).
		if !m.IsResponse() && m.ISPI == s.ispi && m.RSPI == s.rspi && s.repeated(m, raw, remote) {
			return s.lastResp, nil
		}
		return nil, dropped("IKE SA is %v", s.state)
	}
	if m.ISPI != s.ispi || m.RSPI != s.rspi && !(m.Exchange == message.IKESAInit && (m.RSPI == 0 || s.state == StateInitSent)) {
		return nil, dropped("SPIs %016x_i %016x_r are not this SA's", m.ISPI, m.RSPI)
	}
	if m.Flags&message.FlagInitiator != 0 == s.initiator {
		return nil, dropped("I flag says the message is our own")
	}
	if m.Exchange != message.IKESAInit {
		s.from = [2]netip.AddrPort{local, remote}
	}
	if m.IsResponse() {
		return s.handleResponse(m, raw, now)
	}
	return s.handleRequest(m, raw, remote, now)
}

// repeated reports whether request m, raw as it arrived from remote, is
// a retransmission of the request lastResp answers (RFC 7296 §2.1): the
// same bytes (for a fragmented request, those of its first fragment:
// the answer goes once, RFC 7383 §2.6.1), from the address the SA's
// peer is at. Anything less would let anyone who saw a header draw the
// whole answer, fragments and all, to any address: a header of 28 bytes
// drew 3.6 KB. A peer that a NAT moved between its request and the
// repeat is not answered; its next new message moves the SA.
func (s *SA) repeated(m *message.Message, raw []byte, remote netip.AddrPort) bool {
	return s.lastResp != nil && m.MessageID == s.peerNextID-1 && remote == s.remote &&
		sha256.Sum256(raw) == s.lastReq
}

// authenticated is called when a message passed its integrity check: the
// addresses it came by become the SA's when a NAT is in the way.
func (s *SA) authenticated() {
	s.lastHeard = s.now
	if s.NAT() && s.from[1].IsValid() {
		s.local, s.remote = s.from[0], s.from[1]
	}
}

func (s *SA) handleResponse(m *message.Message, raw []byte, now time.Time) ([]byte, error) {
	if s.pending == nil || m.MessageID != s.nextID-1 && !(m.Exchange == message.IKESAInit && m.MessageID == 0) || m.Exchange != s.pendingEx {
		return nil, dropped("unexpected response %v id %d", m.Exchange, m.MessageID)
	}
	if m.Exchange == message.IKESAInit {
		return s.handleInitResponse(m, raw, now)
	}
	ps, err := s.decrypt(m, raw)
	if err == errFragmentHeld {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	s.pending = nil
	switch m.Exchange {
	case message.IKEIntermediate:
		return s.handleIntermediateResponse(m, ps, now)
	case message.IKEAuth:
		return s.handleAuthResponse(ps, now)
	}
	return s.finish(ps, now)
}

// decrypt opens the SK payload of an authenticated exchange.
func (s *SA) decrypt(m *message.Message, raw []byte) ([]message.Payload, error) {
	if s.open != nil && len(m.Payloads) > 0 && m.Payloads[len(m.Payloads)-1].Type == message.TypeSKF {
		return s.reassemble(m, raw, m.Payloads[len(m.Payloads)-1])
	}
	if s.open == nil || len(m.Payloads) == 0 || m.Payloads[len(m.Payloads)-1].Type != message.TypeSK {
		return nil, dropped("%v without an SK payload", m.Exchange)
	}
	sk := m.Payloads[len(m.Payloads)-1]
	plain, err := s.open.Open(raw, sk.Body)
	if err != nil {
		return nil, dropped("%v", err)
	}
	s.authenticated()
	s.hs.opened(sk.Inner, plain)
	return message.ParsePayloads(sk.Inner, plain)
}

func (s *SA) handleRequest(m *message.Message, raw []byte, remote netip.AddrPort, now time.Time) ([]byte, error) {
	if s.lastResp != nil && m.MessageID == s.peerNextID-1 {
		// A retransmission: the same answer (§2.1); to a fragmented
		// request only once, on its first fragment (RFC 7383 §2.6.1).
		switch {
		case laterFragment(m):
			return nil, dropped("a later fragment of a repeated request")
		case !s.repeated(m, raw, remote):
			return nil, dropped("request %d again, but not the bytes answered or not from the peer's address %v", m.MessageID, s.remote)
		}
		return s.lastResp, nil
	}
	if m.MessageID != s.peerNextID || m.Exchange == message.IKESAInit {
		return nil, dropped("request id %d, want %d", m.MessageID, s.peerNextID)
	}
	if s.deferred != nil {
		return nil, dropped("request %d again while its answer waits for the AAA server", m.MessageID)
	}
	ps, err := s.decrypt(m, raw)
	var ce *message.CriticalError
	var reply []message.Payload
	var handleErr error
	switch {
	case err == errFragmentHeld:
		return nil, nil
	case errors.As(err, &ce):
		reply = []message.Payload{notify(message.UnsupportedCriticalPayload, []byte{byte(ce.Type)})}
	case err != nil:
		if errors.Is(err, ErrDropped) {
			return nil, err
		}
		reply = []message.Payload{notify(message.InvalidSyntax, nil)}
	case m.Exchange == message.IKEIntermediate && s.state == StateInitDone:
		reply, handleErr = s.handleIntermediateRequest(m, ps)
	case m.Exchange == message.IKEAuth && s.state == StateInitDone && s.intermediatePending():
		reply = []message.Payload{notify(message.InvalidSyntax, nil)}
		handleErr = s.fail(fmt.Errorf("%w: IKE_AUTH before the additional key exchanges", ErrProtocol))
	case m.Exchange == message.IKEAuth && s.state == StateInitDone:
		reply, handleErr = s.handleAuthRequest(ps)
	case s.state == StateDeleted:
		// Our delete is on its way: the peer's request crossed it.
		// A delete or liveness check needs nothing more than an
		// answer; anything else waits for an SA that will not come.
		if m.Exchange != message.Informational {
			reply = []message.Payload{notify(message.TemporaryFailure, nil)}
		}
	case s.state != StateEstablished:
		return nil, dropped("%v request before the IKE SA is up", m.Exchange)
	case m.Exchange == message.Informational:
		reply = s.answerInformational(ps)
	case m.Exchange == message.CreateChildSA:
		reply, handleErr = s.answerCreate(ps)
	case m.Exchange == message.IKEFollowupKE:
		reply, handleErr = s.answerFollowupKE(ps)
	default:
		reply = []message.Payload{notify(message.InvalidSyntax, nil)}
	}
	reqDigest := sha256.Sum256(raw)
	if isFragment(m) {
		reqDigest = s.reasmFirst
	}
	if handleErr == errDeferred {
		// The answer comes with EAPAnswer (eaprelay.go).
		s.deferred = &deferredAnswer{id: m.MessageID, req: reqDigest}
		return nil, nil
	}
	out, err := s.sealed(s.header(m.Exchange, m.MessageID, true), reply)
	if err != nil {
		return nil, err
	}
	s.peerNextID++
	s.lastResp, s.lastReq = out, reqDigest
	if m.Exchange == message.IKEIntermediate && handleErr == nil && s.state == StateInitDone {
		// The answer went out under the keys it was sealed with; the
		// next message uses the updated ones (RFC 9370 §2.2.2).
		if err := s.intermediateAnswered(m.MessageID, reply); err != nil {
			return out, s.fail(err)
		}
	}
	return out, handleErr
}

func notify(t message.NotifyType, data []byte) message.Payload {
	return message.Payload{Type: message.TypeN, Body: message.AppendNotify(nil, 0, t, nil, data)}
}

// notifyOf returns the first notify of type t among ps.
func notifyOf(ps []message.Payload, t message.NotifyType) (message.Notify, bool) {
	for _, n := range message.Notifies(ps) {
		if n.IsValid() && n.Type() == t {
			return n, true
		}
	}
	return nil, false
}

// firstError returns the first error notify among ps.
func firstError(ps []message.Payload) (message.NotifyType, bool) {
	for _, n := range message.Notifies(ps) {
		if n.IsValid() && n.Type().IsError() {
			return n.Type(), true
		}
	}
	return 0, false
}
