package ike

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/ipsecd/ipsecd/ike/dh"
	"github.com/ipsecd/ipsecd/ike/keys"
	"github.com/ipsecd/ipsecd/ike/message"
)

// IKE_INTERMEDIATE (RFC 9242) for the additional key exchanges of the
// initial handshake (RFC 9370 §2.2.2): when IKE_SA_INIT chose ADDKE
// transforms, the initiator runs one IKE_INTERMEDIATE exchange per
// exchange, in order (ADDKE1 first), each carrying one KE payload each
// way, encrypted under the keys of the moment. After each, both sides
// update the IKE SA's keys:
//
//	SKEYSEED(n) = prf(SK_d(n-1), SK(n) | Ni | Nr)
//	{SK_d(n) | SK_ai(n) | ... | SK_pr(n)} = prf+(SKEYSEED(n), Ni | Nr | SPIi | SPIr)
//
// and IKE_AUTH runs under the last keys. So that AUTH also covers what
// IKE_INTERMEDIATE carried, each side chains the messages in IntAuth
// (RFC 9242 §3.3.2):
//
//	IntAuth_in = prf(SK_pi(n-1), IntAuth_i(n-1) | IntAuth_in_A | IntAuth_in_P)
//	IntAuth_rn = prf(SK_pr(n-1), IntAuth_r(n-1) | IntAuth_rn_A | IntAuth_rn_P)
//	IntAuth    = IntAuth_iN | IntAuth_rN | IKE_AUTH's Message ID
//
// where _A is the message's IKE header and Encrypted payload header, their
// lengths counting the inner payloads alone (no IV, padding or ICV; a
// fragmented message as if it were whole), and _P the inner payloads;
// SK_p is the key that protected the message. AUTH's signed octets end in
// IntAuth (keys.SignedOctets).

// intermediatePending reports whether additional key exchanges remain
// before IKE_AUTH.
func (s *SA) intermediatePending() bool { return s.hs != nil && len(s.hs.addKEs) > 0 }

// opened records the inner payloads of a message just decrypted, for
// IntAuth. Nothing is kept once the handshake is over (h nil).
func (h *handshake) opened(inner message.PayloadType, plain []byte) {
	if h != nil {
		h.lastInner, h.lastPlain = inner, plain
	}
}

// intAuthHeader returns the part of IntAuth_A | IntAuth_P of an
// IKE_INTERMEDIATE message with header fields hf that precedes its inner
// payloads, first of type inner and n bytes long: the header and
// Encrypted payload header as if the message were one SK payload holding
// the payloads and nothing else. The payloads follow it into the PRF
// as they are, not copied behind it (an ML-KEM key share is 1-1.6 KB).
func intAuthHeader(hf message.HeaderFields, inner message.PayloadType, n int) []byte {
	total := message.HeaderLen + message.PayloadHeaderLen + n
	b := message.AppendHeader(make([]byte, 0, message.HeaderLen+message.PayloadHeaderLen), hf, message.TypeSK, uint32(total))
	return message.AppendPayloadHeader(b, inner, false, n)
}

// chainIntAuth adds a message to the initiator's (fromInitiator) or the
// responder's IntAuth chain, with the SK_p of the keys that protected it.
func (s *SA) chainIntAuth(fromInitiator bool, hf message.HeaderFields, inner message.PayloadType, plain []byte) {
	h := intAuthHeader(hf, inner, len(plain))
	if fromInitiator {
		s.hs.intAuthI = s.prf.Sum(s.keys.PI, s.hs.intAuthI, h, plain)
	} else {
		s.hs.intAuthR = s.prf.Sum(s.keys.PR, s.hs.intAuthR, h, plain)
	}
}

// intAuth returns RFC 9242's IntAuth for AUTH, nil when no
// IKE_INTERMEDIATE exchange ran. IKE_AUTH's Message ID follows the
// intermediate exchanges' (IKE_SA_INIT is 0, they are 1..N).
func (s *SA) intAuth() []byte {
	if s.hs == nil || s.hs.done == 0 {
		return nil
	}
	out := append(append([]byte(nil), s.hs.intAuthI...), s.hs.intAuthR...)
	return binary.BigEndian.AppendUint32(out, uint32(s.hs.done+1))
}

// updateKeys derives the IKE SA's keys anew from the shared secret of an
// additional key exchange (RFC 9370 §2.2.2) and wipes the old ones.
func (s *SA) updateKeys(shared []byte) error {
	defer clear(shared)
	seed := keys.RekeySKEYSEED(s.prf, s.keys.D, shared, s.hs.ni, s.hs.nr)
	s.keylogPrevious()
	s.keys.Clear()
	s.hs.addKEs = s.hs.addKEs[1:]
	s.hs.done++
	return s.deriveIKEFrom(seed, s.hs.ni, s.hs.nr)
}

// intermediateRequest starts the IKE_INTERMEDIATE exchange of the next
// additional key exchange (initiator).
func (s *SA) intermediateRequest(now time.Time) ([]byte, error) {
	method := s.hs.addKEs[0]
	if err := s.newKE(method.ID); err != nil {
		return nil, err
	}
	ps := []message.Payload{{Type: message.TypeKE, Body: message.AppendKE(nil, method.ID, s.hs.priv.Public())}}
	plain, inner := message.AppendPayloads(nil, ps)
	s.chainIntAuth(true, s.header(message.IKEIntermediate, s.nextID, false), inner, plain)
	return s.request(message.IKEIntermediate, ps, now)
}

// handleIntermediateResponse completes an additional key exchange
// (initiator) and goes on with the next one, or with IKE_AUTH.
func (s *SA) handleIntermediateResponse(m *message.Message, ps []message.Payload, now time.Time) ([]byte, error) {
	if !s.intermediatePending() || s.state != StateAuthSent {
		return nil, s.fail(fmt.Errorf("%w: an IKE_INTERMEDIATE response we did not ask for", ErrProtocol))
	}
	method := s.hs.addKEs[0]
	if t, ok := firstError(ps); ok {
		return nil, s.fail(fmt.Errorf("%w: IKE_INTERMEDIATE (%s) answered with error notify %d", ErrProtocol, method.Name, t))
	}
	ke := message.KE(message.Get(ps, message.TypeKE))
	if !ke.IsValid() || ke.Group() != method.ID {
		return nil, s.fail(fmt.Errorf("%w: IKE_INTERMEDIATE response without a KE of %s", ErrProtocol, method.Name))
	}
	s.chainIntAuth(false, m.HeaderFields, s.hs.lastInner, s.hs.lastPlain)
	shared, err := s.hs.priv.Shared(ke.Data())
	s.hs.priv.Clear()
	if err != nil {
		return nil, s.fail(fmt.Errorf("%w: IKE_INTERMEDIATE (%s): %v", ErrProtocol, method.Name, err))
	}
	if err := s.updateKeys(shared); err != nil {
		return nil, s.fail(err)
	}
	if s.intermediatePending() {
		return s.intermediateRequest(now)
	}
	return s.authRequest(now)
}

// handleIntermediateRequest answers an additional key exchange
// (responder): the KE of the negotiated method, or INVALID_SYNTAX for
// KE data that is not of the method (a truncated or oversized ML-KEM key
// included), which ends the SA. The keys are updated once the answer is
// sealed (intermediateAnswered).
func (s *SA) handleIntermediateRequest(m *message.Message, ps []message.Payload) ([]message.Payload, error) {
	if !s.intermediatePending() {
		err := fmt.Errorf("%w: IKE_INTERMEDIATE without an additional key exchange to run", ErrProtocol)
		return []message.Payload{notify(message.InvalidSyntax, nil)}, s.fail(err)
	}
	method := s.hs.addKEs[0]
	ke := message.KE(message.Get(ps, message.TypeKE))
	if !ke.IsValid() || ke.Group() != method.ID {
		err := fmt.Errorf("%w: IKE_INTERMEDIATE request without a KE of %s", ErrProtocol, method.Name)
		return []message.Payload{notify(message.InvalidSyntax, nil)}, s.fail(err)
	}
	s.chainIntAuth(true, m.HeaderFields, s.hs.lastInner, s.hs.lastPlain)
	priv, err := dh.New(method.ID, s.cfg.rand())
	if err != nil {
		return []message.Payload{notify(message.InvalidSyntax, nil)}, s.fail(err)
	}
	shared, err := priv.Shared(ke.Data())
	if err != nil {
		priv.Clear()
		err = fmt.Errorf("%w: IKE_INTERMEDIATE (%s): %v", ErrProtocol, method.Name, err)
		return []message.Payload{notify(message.InvalidSyntax, nil)}, s.fail(err)
	}
	s.hs.priv.Clear()
	s.hs.priv, s.hs.shared = priv, shared
	return []message.Payload{{Type: message.TypeKE, Body: message.AppendKE(nil, method.ID, priv.Public())}}, nil
}

// intermediateAnswered chains our answer (id, its payloads reply) into
// IntAuth under the keys that sealed it, then updates the keys
// (responder).
func (s *SA) intermediateAnswered(id uint32, reply []message.Payload) error {
	plain, inner := message.AppendPayloads(nil, reply)
	s.chainIntAuth(false, s.header(message.IKEIntermediate, id, true), inner, plain)
	shared := s.hs.shared
	s.hs.shared = nil
	s.hs.priv.Clear()
	return s.updateKeys(shared)
}
