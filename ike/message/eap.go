package message

import "encoding/binary"

// EAP is the body of an EAP payload (RFC 7296 §3.16): one EAP packet
// (RFC 3748 §4):
//
//	                     1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Code      | Identifier    |            Length             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Type      |  Type_Data ...
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-
//
// Length counts the whole packet; Type and Type_Data are in Requests and
// Responses only. The methods (package ike/eap) read Type_Data.
type EAP []byte

// EAPCode is an EAP packet's Code (RFC 3748 §4).
type EAPCode uint8

const (
	EAPRequest  EAPCode = 1
	EAPResponse EAPCode = 2
	EAPSuccess  EAPCode = 3
	EAPFailure  EAPCode = 4
)

// EAPType is the Type of an EAP Request or Response (RFC 3748 §5, and the
// methods' RFCs).
type EAPType uint8

const (
	EAPIdentity     EAPType = 1
	EAPNotification EAPType = 2
	EAPNak          EAPType = 3 // legacy Nak: Type_Data lists the types the peer wants
	EAPMD5          EAPType = 4
	EAPTLS          EAPType = 13
	EAPMSCHAPv2     EAPType = 26
	EAPExpanded     EAPType = 254
)

// EAPHeaderLen is Code, Identifier and Length; a Request or Response has
// its Type after them.
const EAPHeaderLen = 4

// IsValid reports whether e is one whole EAP packet: Length is len(e), a
// Request or Response has its Type, a Success or Failure nothing past its
// header (RFC 3748 §4.2), and the Code is one of the four.
func (e EAP) IsValid() bool {
	if len(e) < EAPHeaderLen || int(binary.BigEndian.Uint16(e[2:])) != len(e) {
		return false
	}
	switch e.Code() {
	case EAPRequest, EAPResponse:
		return len(e) > EAPHeaderLen
	case EAPSuccess, EAPFailure:
		return len(e) == EAPHeaderLen
	}
	return false
}

func (e EAP) Code() EAPCode     { return EAPCode(e[0]) }
func (e EAP) Identifier() uint8 { return e[1] }

// Type returns a Request's or Response's Type; e must be valid and one.
func (e EAP) Type() EAPType { return EAPType(e[EAPHeaderLen]) }

// Data returns a Request's or Response's Type_Data.
func (e EAP) Data() []byte { return e[EAPHeaderLen+1:] }

// AppendEAP appends an EAP Request or Response of type t with data;
// len(data) must be under 65531.
func AppendEAP(dst []byte, code EAPCode, id uint8, t EAPType, data []byte) []byte {
	dst = append(dst, byte(code), id)
	dst = binary.BigEndian.AppendUint16(dst, uint16(EAPHeaderLen+1+len(data)))
	return append(append(dst, byte(t)), data...)
}

// AppendEAPResult appends an EAP Success or Failure (code).
func AppendEAPResult(dst []byte, code EAPCode, id uint8) []byte {
	return append(dst, byte(code), id, 0, EAPHeaderLen)
}
