package message

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The IKE header (RFC 7296 §3.1):
//
//	                     1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       IKE SA Initiator's SPI                  |
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       IKE SA Responder's SPI                  |
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Next Payload | MjVer | MnVer | Exchange Type |     Flags     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                          Message ID                           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                            Length                             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
const (
	ispiOffset     = 0
	rspiOffset     = 8
	nextOffset     = 16
	versionOffset  = 17
	exchangeOffset = 18
	flagsOffset    = 19
	msgIDOffset    = 20
	lengthOffset   = 24
)

const (
	// HeaderLen is the size of the IKE header.
	HeaderLen = 28
	// PayloadHeaderLen is the size of the generic payload header.
	PayloadHeaderLen = 4
	// Version is the version octet of IKEv2 (major 2, minor 0).
	Version = 0x20
	// MaxLen bounds the messages Parse accepts: larger ones cannot
	// arrive in one UDP datagram.
	MaxLen = 65535
)

// ExchangeType is the header's exchange type (RFC 7296 §3.1).
type ExchangeType uint8

const (
	IKESAInit     ExchangeType = 34
	IKEAuth       ExchangeType = 35
	CreateChildSA ExchangeType = 36
	Informational ExchangeType = 37
	// IKEIntermediate is RFC 9242's IKE_INTERMEDIATE: exchanges between
	// IKE_SA_INIT and IKE_AUTH, encrypted, here one per additional key
	// exchange (RFC 9370).
	IKEIntermediate ExchangeType = 43
	// IKEFollowupKE is RFC 9370's IKE_FOLLOWUP_KE, the additional key
	// exchanges of a CREATE_CHILD_SA (not implemented yet).
	IKEFollowupKE ExchangeType = 44
)

func (e ExchangeType) String() string {
	switch e {
	case IKESAInit:
		return "IKE_SA_INIT"
	case IKEAuth:
		return "IKE_AUTH"
	case CreateChildSA:
		return "CREATE_CHILD_SA"
	case Informational:
		return "INFORMATIONAL"
	case IKEIntermediate:
		return "IKE_INTERMEDIATE"
	case IKEFollowupKE:
		return "IKE_FOLLOWUP_KE"
	}
	return fmt.Sprintf("EXCHANGE(%d)", uint8(e))
}

// Flags are the header's flag bits.
type Flags uint8

const (
	FlagResponse  Flags = 0x20 // R: this message is a response
	FlagVersion   Flags = 0x10 // V: the sender can speak a higher major version
	FlagInitiator Flags = 0x08 // I: sent by the original initiator of the IKE SA
)

// Header is an IKE header at the start of a message.
type Header []byte

// IsValid reports whether h holds a whole header.
func (h Header) IsValid() bool { return len(h) >= HeaderLen }

func (h Header) ISPI() uint64               { return binary.BigEndian.Uint64(h[ispiOffset:]) }
func (h Header) RSPI() uint64               { return binary.BigEndian.Uint64(h[rspiOffset:]) }
func (h Header) NextPayload() PayloadType   { return PayloadType(h[nextOffset]) }
func (h Header) Version() uint8             { return h[versionOffset] }
func (h Header) ExchangeType() ExchangeType { return ExchangeType(h[exchangeOffset]) }
func (h Header) Flags() Flags               { return Flags(h[flagsOffset]) }
func (h Header) MessageID() uint32          { return binary.BigEndian.Uint32(h[msgIDOffset:]) }
func (h Header) Length() uint32             { return binary.BigEndian.Uint32(h[lengthOffset:]) }

// SetLength writes the length field.
func (h Header) SetLength(n uint32) { binary.BigEndian.PutUint32(h[lengthOffset:], n) }

// HeaderFields are the header's fields other than next payload and length,
// which the encoder computes.
type HeaderFields struct {
	ISPI, RSPI uint64
	Exchange   ExchangeType
	Flags      Flags
	MessageID  uint32
}

// IsResponse reports whether the R flag is set.
func (f HeaderFields) IsResponse() bool { return f.Flags&FlagResponse != 0 }

// Fields returns h's fields.
func (h Header) Fields() HeaderFields {
	return HeaderFields{ISPI: h.ISPI(), RSPI: h.RSPI(), Exchange: h.ExchangeType(), Flags: h.Flags(), MessageID: h.MessageID()}
}

// AppendHeader appends an IKE header with the given next payload and total
// message length.
func AppendHeader(dst []byte, f HeaderFields, next PayloadType, length uint32) []byte {
	dst = binary.BigEndian.AppendUint64(dst, f.ISPI)
	dst = binary.BigEndian.AppendUint64(dst, f.RSPI)
	dst = append(dst, byte(next), Version, byte(f.Exchange), byte(f.Flags))
	dst = binary.BigEndian.AppendUint32(dst, f.MessageID)
	return binary.BigEndian.AppendUint32(dst, length)
}

// AppendPayloadHeader appends a generic payload header (RFC 7296 §3.2) for
// a body of bodyLen bytes.
func AppendPayloadHeader(dst []byte, next PayloadType, critical bool, bodyLen int) []byte {
	c := byte(0)
	if critical {
		c = 0x80
	}
	return append(dst, byte(next), c, byte((bodyLen+PayloadHeaderLen)>>8), byte(bodyLen+PayloadHeaderLen))
}

// Errors Parse returns. A message that fails with any of them is dropped
// (RFC 7296 §2.21: nothing is sent back for a message that does not parse
// before it is authenticated), except as the CriticalError doc says.
var (
	ErrShort        = errors.New("ike message: truncated")
	ErrLength       = errors.New("ike message: length field does not match")
	ErrMajorVersion = errors.New("ike message: major version is not 2")
	ErrSKNotLast    = errors.New("ike message: SK payload is not the last")
)

// CriticalError reports a payload type the parser does not know with the
// critical bit set. Answer with an UNSUPPORTED_CRITICAL_PAYLOAD notify
// whose data is the type octet.
type CriticalError struct{ Type PayloadType }

func (e *CriticalError) Error() string {
	return fmt.Sprintf("ike message: unsupported critical payload %d", uint8(e.Type))
}
