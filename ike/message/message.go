package message

import (
	"encoding/binary"
	"fmt"
)

// PayloadType is a next-payload value (RFC 7296 §3.2).
type PayloadType uint8

const (
	NoNext   PayloadType = 0
	TypeSA   PayloadType = 33
	TypeKE   PayloadType = 34
	TypeIDi  PayloadType = 35
	TypeIDr  PayloadType = 36
	TypeCERT PayloadType = 37
	TypeCREQ PayloadType = 38 // CERTREQ
	TypeAUTH PayloadType = 39
	TypeNONC PayloadType = 40 // Nonce
	TypeN    PayloadType = 41 // Notify
	TypeD    PayloadType = 42 // Delete
	TypeV    PayloadType = 43 // Vendor ID
	TypeTSi  PayloadType = 44
	TypeTSr  PayloadType = 45
	TypeSK   PayloadType = 46
	TypeCP   PayloadType = 47
	TypeEAP  PayloadType = 48
	TypeSKF  PayloadType = 53 // RFC 7383 encrypted fragment
)

var payloadNames = map[PayloadType]string{
	TypeSA: "SA", TypeKE: "KE", TypeIDi: "IDi", TypeIDr: "IDr", TypeCERT: "CERT",
	TypeCREQ: "CERTREQ", TypeAUTH: "AUTH", TypeNONC: "No", TypeN: "N", TypeD: "D",
	TypeV: "V", TypeTSi: "TSi", TypeTSr: "TSr", TypeSK: "SK", TypeCP: "CP",
	TypeEAP: "EAP", TypeSKF: "SKF",
}

func (t PayloadType) String() string {
	if n, ok := payloadNames[t]; ok {
		return n
	}
	return fmt.Sprintf("PAYLOAD(%d)", uint8(t))
}

// known reports whether Parse keeps payloads of type t (the others are
// skipped, or refused when critical).
func (t PayloadType) known() bool {
	_, ok := payloadNames[t]
	return ok
}

// Payload is one payload of a message. Body excludes the generic header
// and aliases the parsed input.
type Payload struct {
	Type     PayloadType
	Critical bool
	// Inner is, for an SK payload, the type of the first payload inside
	// it (the SK header's next-payload field); for an SKF payload the
	// same, in the first fragment only (0 in the others).
	Inner PayloadType
	Body  []byte
}

// Message is a parsed IKE message.
type Message struct {
	HeaderFields
	Payloads []Payload
}

// Get returns the first payload of type t, or nil.
func (m *Message) Get(t PayloadType) []byte { return get(m.Payloads, t) }

func get(ps []Payload, t PayloadType) []byte {
	for _, p := range ps {
		if p.Type == t {
			return p.Body
		}
	}
	return nil
}

// Notifies returns the bodies of the Notify payloads among ps.
func Notifies(ps []Payload) []Notify {
	var ns []Notify
	for _, p := range ps {
		if p.Type == TypeN {
			ns = append(ns, Notify(p.Body))
		}
	}
	return ns
}

// Get returns the first payload of type t among ps, or nil.
func Get(ps []Payload, t PayloadType) []byte { return get(ps, t) }

// Parse parses a whole IKE message (after any non-ESP marker). The
// result's bodies alias b.
func Parse(b []byte) (*Message, error) {
	if len(b) < HeaderLen {
		return nil, ErrShort
	}
	h := Header(b)
	if h.Version()>>4 != 2 {
		return nil, ErrMajorVersion
	}
	if len(b) > MaxLen || h.Length() != uint32(len(b)) {
		return nil, ErrLength
	}
	ps, err := ParsePayloads(h.NextPayload(), b[HeaderLen:])
	if err != nil {
		return nil, err
	}
	return &Message{HeaderFields: h.Fields(), Payloads: ps}, nil
}

// ParsePayloads walks a payload chain whose first payload has type first
// and which fills b exactly: a message's payloads or the decrypted content
// of an SK payload. An SK payload must be the last of its chain; its
// next-payload field becomes Inner.
func ParsePayloads(first PayloadType, b []byte) ([]Payload, error) {
	var ps []Payload
	next := first
	for next != NoNext {
		if len(b) < PayloadHeaderLen {
			return nil, ErrShort
		}
		n := int(binary.BigEndian.Uint16(b[2:]))
		if n < PayloadHeaderLen || n > len(b) {
			return nil, ErrLength
		}
		p := Payload{Type: next, Critical: b[1]&0x80 != 0, Body: b[PayloadHeaderLen:n]}
		following := PayloadType(b[0])
		b = b[n:]
		if p.Type == TypeSK || p.Type == TypeSKF {
			if len(b) != 0 {
				return nil, ErrSKNotLast
			}
			p.Inner = following
			following = NoNext
		}
		next = following
		if !p.Type.known() {
			if p.Critical {
				return nil, &CriticalError{Type: p.Type}
			}
			continue
		}
		ps = append(ps, p)
	}
	if len(b) != 0 {
		return nil, ErrLength
	}
	return ps, nil
}

// AppendPayloads appends the payload chain ps and returns the type of its
// first payload (NoNext for none), to be written in the header before it.
// An SK payload must be last; its Inner is written as its next payload.
func AppendPayloads(dst []byte, ps []Payload) ([]byte, PayloadType) {
	for i, p := range ps {
		next := NoNext
		if i+1 < len(ps) {
			next = ps[i+1].Type
		}
		if p.Type == TypeSK || p.Type == TypeSKF {
			next = p.Inner
		}
		dst = AppendPayloadHeader(dst, next, p.Critical, len(p.Body))
		dst = append(dst, p.Body...)
	}
	if len(ps) == 0 {
		return dst, NoNext
	}
	return dst, ps[0].Type
}

// Encode returns m in wire format.
func Encode(m *Message) []byte {
	body, first := AppendPayloads(nil, m.Payloads)
	out := AppendHeader(make([]byte, 0, HeaderLen+len(body)), m.HeaderFields, first, uint32(HeaderLen+len(body)))
	return append(out, body...)
}
