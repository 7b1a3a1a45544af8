package message

import (
	"encoding/binary"
	"errors"
)

// ProtocolID names the protocol of a proposal, notify or delete.
type ProtocolID uint8

const (
	ProtoIKE ProtocolID = 1
	ProtoAH  ProtocolID = 2
	ProtoESP ProtocolID = 3
)

// TransformType is a transform's type (RFC 7296 §3.3.2).
type TransformType uint8

const (
	TransENCR  TransformType = 1
	TransPRF   TransformType = 2
	TransINTEG TransformType = 3
	TransDH    TransformType = 4 // key exchange method
	TransESN   TransformType = 5
	// TransADDKE1 to TransADDKE7 (types 6 to 12) are RFC 9370's
	// Additional Key Exchange 1 to 7: key exchange methods run after
	// the one of transform type 4, in IKE_INTERMEDIATE (IKE_SA_INIT) or
	// IKE_FOLLOWUP_KE (CREATE_CHILD_SA), with transform ID 0 (NONE)
	// making one optional.
	TransADDKE1 TransformType = 6
	TransADDKE7 TransformType = 12
)

// IsAddKE reports whether t is one of RFC 9370's Additional Key
// Exchange types.
func (t TransformType) IsAddKE() bool { return t >= TransADDKE1 && t <= TransADDKE7 }

// AttrKeyLength is the Key Length attribute type (TV format).
const AttrKeyLength = 14

// Transform is one transform of a proposal.
type Transform struct {
	Type TransformType
	ID   uint16
	// KeyLen is the Key Length attribute in bits, 0 when absent.
	KeyLen uint16
	// UnknownAttr is set when the transform carried an attribute other
	// than Key Length: RFC 7296 §3.3.6 says to reject such a transform.
	UnknownAttr bool
}

// Proposal is one proposal substructure (RFC 7296 §3.3.1).
type Proposal struct {
	Num        uint8
	Protocol   ProtocolID
	SPI        []byte // empty for IKE_SA_INIT; 8 bytes for IKE rekey, 4 for ESP
	Transforms []Transform
}

// SA is the body of a Security Association payload:
//
//	Proposal:
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| Last Substruc |   RESERVED    |         Proposal Length       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| Proposal Num  |  Protocol ID  |    SPI Size   |Num  Transforms|
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	~                        SPI (variable)                         ~
//	~                        <Transforms>                           ~
//
//	Transform:
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| Last Substruc |   RESERVED    |        Transform Length       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Transform Type |   RESERVED    |          Transform ID         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	~                      Transform Attributes                     ~
type SA []byte

const (
	lastProposal  = 2
	lastTransform = 3
	proposalHdr   = 8
	transformHdr  = 8
)

// ErrBadSA is returned for an SA payload whose structure is inconsistent.
var ErrBadSA = errors.New("ike message: malformed SA payload")

// Proposals decodes the proposals. The SPIs alias s.
func (s SA) Proposals() ([]Proposal, error) {
	var ps []Proposal
	b := []byte(s)
	for len(b) > 0 {
		if len(b) < proposalHdr {
			return nil, ErrBadSA
		}
		n := int(binary.BigEndian.Uint16(b[2:]))
		if n < proposalHdr || n > len(b) {
			return nil, ErrBadSA
		}
		last := b[0] == 0
		if !last && b[0] != lastProposal {
			return nil, ErrBadSA
		}
		p := Proposal{Num: b[4], Protocol: ProtocolID(b[5])}
		spiLen, numT := int(b[6]), int(b[7])
		body := b[proposalHdr:n]
		b = b[n:]
		if spiLen > len(body) {
			return nil, ErrBadSA
		}
		p.SPI, body = body[:spiLen], body[spiLen:]
		for i := 0; i < numT; i++ {
			t, rest, err := parseTransform(body, i == numT-1)
			if err != nil {
				return nil, err
			}
			p.Transforms = append(p.Transforms, t)
			body = rest
		}
		if len(body) != 0 {
			return nil, ErrBadSA
		}
		ps = append(ps, p)
		if last != (len(b) == 0) {
			return nil, ErrBadSA
		}
	}
	if len(ps) == 0 {
		return nil, ErrBadSA
	}
	return ps, nil
}

func parseTransform(b []byte, last bool) (Transform, []byte, error) {
	var t Transform
	if len(b) < transformHdr {
		return t, nil, ErrBadSA
	}
	n := int(binary.BigEndian.Uint16(b[2:]))
	if n < transformHdr || n > len(b) || (b[0] == 0) != last || (b[0] != 0 && b[0] != lastTransform) {
		return t, nil, ErrBadSA
	}
	t.Type = TransformType(b[4])
	t.ID = binary.BigEndian.Uint16(b[6:])
	attrs := b[transformHdr:n]
	for len(attrs) > 0 {
		if len(attrs) < 4 {
			return t, nil, ErrBadSA
		}
		typ := binary.BigEndian.Uint16(attrs)
		if typ&0x8000 != 0 { // TV: the value is in the header
			if typ&0x7fff == AttrKeyLength {
				t.KeyLen = binary.BigEndian.Uint16(attrs[2:])
			} else {
				t.UnknownAttr = true
			}
			attrs = attrs[4:]
			continue
		}
		l := int(binary.BigEndian.Uint16(attrs[2:]))
		if 4+l > len(attrs) {
			return t, nil, ErrBadSA
		}
		t.UnknownAttr = true // Key Length is TV only (§3.3.5)
		attrs = attrs[4+l:]
	}
	return t, b[n:], nil
}

// AppendSA appends the body of an SA payload holding ps, numbering them
// as their Num fields say.
func AppendSA(dst []byte, ps []Proposal) []byte {
	for i, p := range ps {
		start := len(dst)
		last := byte(lastProposal)
		if i == len(ps)-1 {
			last = 0
		}
		dst = append(dst, last, 0, 0, 0, p.Num, byte(p.Protocol), byte(len(p.SPI)), byte(len(p.Transforms)))
		dst = append(dst, p.SPI...)
		for j, t := range p.Transforms {
			tl := byte(lastTransform)
			if j == len(p.Transforms)-1 {
				tl = 0
			}
			n := transformHdr
			if t.KeyLen != 0 {
				n += 4
			}
			dst = append(dst, tl, 0, byte(n>>8), byte(n), byte(t.Type), 0, byte(t.ID>>8), byte(t.ID))
			if t.KeyLen != 0 {
				dst = append(dst, 0x80, AttrKeyLength, byte(t.KeyLen>>8), byte(t.KeyLen))
			}
		}
		binary.BigEndian.PutUint16(dst[start+2:], uint16(len(dst)-start))
	}
	return dst
}
