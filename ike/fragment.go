package ike

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/ipsecd/ipsecd/ike/message"
)

// IKE fragmentation (RFC 7383): both sides announce FRAGMENTATION_SUPPORTED
// in IKE_SA_INIT; afterwards an encrypted message whose datagram would
// exceed Config.FragmentSize is sent as SKF payloads, each encrypted and
// authenticated on its own, and the receiver reassembles them after
// checking each one. Reassembly holds one message per SA, bounded in
// fragments (MaxFragments), bytes (message.MaxLen) and time
// (FragmentTimeout).

// DefaultFragmentSize is the default of Config.FragmentSize: the largest
// IP datagram an IKE fragment may fill, strongSwan's fragment_size (RFC
// 7383 §2.5.1: IPv6's minimum MTU, which few IPv4 paths fall below).
const DefaultFragmentSize = 1280

// MaxFragments bounds the fragments of one message we send or accept.
const MaxFragments = 64

// FragmentTimeout is how long an incomplete reassembly may wait for its
// missing fragments before a new fragment starts over.
const FragmentTimeout = 30 * time.Second

// minFragmentSize keeps a misconfigured FragmentSize from making
// fragments with no room for data.
const minFragmentSize = 576

// errFragmentHeld says a fragment was stored and its message is not
// complete yet: nothing to answer, nothing to count.
var errFragmentHeld = errors.New("ike: fragment held for reassembly")

// reassembly collects the fragments of one message.
type reassembly struct {
	id       uint32
	response bool
	total    uint16
	inner    message.PayloadType
	parts    [][]byte
	have     int
	size     int
	started  time.Time
	// first is the SHA-256 of fragment 1 as it arrived: a repeat of
	// the request is recognised by it (SA.repeated).
	first [sha256.Size]byte
}

// fragmentLimit is the largest IKE message we send in one datagram: the
// fragment size less the IP and UDP headers and the non-ESP marker.
func (s *SA) fragmentLimit() int {
	size := s.cfg.FragmentSize
	if size == 0 {
		size = DefaultFragmentSize
	}
	size = max(size, minFragmentSize)
	size -= 8 // UDP
	if s.remote.Addr().Unmap().Is4() {
		size -= 20
	} else {
		size -= 40
	}
	if s.remote.Port() == NATTPort {
		size -= 4
	}
	return size
}

// sealed returns an encrypted message carrying ps: one SK payload, or,
// with fragmentation negotiated and a message too large for one
// datagram, the first of its fragments (Packets gives them all).
func (s *SA) sealed(h message.HeaderFields, ps []message.Payload) ([]byte, error) {
	plain, first := message.AppendPayloads(nil, ps)
	slot := 0
	if h.IsResponse() {
		slot = 1
	}
	s.fragments[slot] = nil
	limit := s.fragmentLimit()
	if !s.fragOK || message.HeaderLen+message.PayloadHeaderLen+s.seal.Overhead()+len(plain) <= limit {
		return s.seal.Seal(h, first, plain)
	}
	chunk := limit - message.HeaderLen - message.PayloadHeaderLen - message.SKFHeaderLen - s.seal.Overhead()
	n := (len(plain) + chunk - 1) / chunk
	if n > MaxFragments {
		return nil, fmt.Errorf("ike: a %d-byte message needs %d fragments, more than %d", len(plain), n, MaxFragments)
	}
	frags := make([][]byte, 0, n)
	for i := 0; i < n; i++ {
		inner := message.NoNext
		if i == 0 {
			inner = first
		}
		f, err := s.seal.SealFragment(h, inner, uint16(i+1), uint16(n), plain[i*chunk:min((i+1)*chunk, len(plain))])
		if err != nil {
			return nil, err
		}
		frags = append(frags, f)
	}
	s.fragments[slot] = frags
	return frags[0], nil
}

// Packets returns the datagrams that carry msg, a message this SA
// returned (from HandleFrom, Tick or an action): msg itself, or, when it
// was fragmented (RFC 7383), all its fragments, the first of which is
// msg. Send them all, in order, wherever msg was to go.
func (s *SA) Packets(msg []byte) [][]byte {
	for _, frags := range s.fragments {
		if len(frags) > 0 && len(msg) > 0 && &frags[0][0] == &msg[0] {
			return frags
		}
	}
	return [][]byte{msg}
}

// reassemble checks and decrypts one fragment of m and returns the
// payloads of the whole message once every fragment is in, or
// errFragmentHeld until then. A fragment that does not authenticate is
// dropped and disturbs nothing.
func (s *SA) reassemble(m *message.Message, raw []byte, p message.Payload) ([]message.Payload, error) {
	f := message.SKF(p.Body)
	if !s.fragOK {
		return nil, dropped("a fragment, but fragmentation was not negotiated")
	}
	if !f.IsValid() || f.Total() > MaxFragments {
		return nil, dropped("fragment %d of %d", f.Number(), f.Total())
	}
	plain, err := s.open.Open(raw, f.Encrypted())
	if err != nil {
		return nil, dropped("%v", err)
	}
	s.authenticated()
	r := s.reasm
	switch {
	case r == nil || r.id != m.MessageID || r.response != m.IsResponse() || s.now.Sub(r.started) > FragmentTimeout,
		f.Total() > r.total: // re-fragmented smaller (RFC 7383 §2.6.1): start over
		r = &reassembly{id: m.MessageID, response: m.IsResponse(), total: f.Total(), parts: make([][]byte, f.Total()), started: s.now}
		s.reasm = r
	case f.Total() < r.total:
		return nil, dropped("fragment of an older fragmentation of message %d", m.MessageID)
	}
	i := int(f.Number()) - 1
	if r.parts[i] != nil {
		return nil, errFragmentHeld // a duplicate
	}
	if r.size+len(plain) > message.MaxLen {
		s.reasm = nil
		return nil, dropped("reassembled message %d would exceed %d bytes", m.MessageID, message.MaxLen)
	}
	r.parts[i], r.size, r.have = plain, r.size+len(plain), r.have+1
	if i == 0 {
		r.inner = p.Inner
		r.first = sha256.Sum256(raw)
	}
	if r.have < int(r.total) {
		return nil, errFragmentHeld
	}
	s.reasm = nil
	s.reasmFirst = r.first
	whole := make([]byte, 0, r.size)
	for _, part := range r.parts {
		whole = append(whole, part...)
	}
	s.hs.opened(r.inner, whole)
	return message.ParsePayloads(r.inner, whole)
}

// isFragment reports whether m carries an SKF payload (RFC 7383).
func isFragment(m *message.Message) bool {
	p := m.Payloads
	return len(p) > 0 && p[len(p)-1].Type == message.TypeSKF
}

// laterFragment reports whether m is a fragment other than the first (or
// a malformed one): a repeated request is answered on its first
// fragment only, so that n fragments do not draw n answers.
func laterFragment(m *message.Message) bool {
	p := m.Payloads
	if len(p) == 0 || p[len(p)-1].Type != message.TypeSKF {
		return false
	}
	f := message.SKF(p[len(p)-1].Body)
	return !f.IsValid() || f.Number() != 1
}
