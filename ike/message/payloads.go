package message

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// ErrBadPayload is returned by the typed views for a body too short or
// inconsistent for its type; the exchange answers INVALID_SYNTAX.
var ErrBadPayload = errors.New("ike message: malformed payload")

// KE is the body of a Key Exchange payload (RFC 7296 §3.4): DH group (2),
// reserved (2), key exchange data.
type KE []byte

// IsValid reports whether k has a group and at least one byte of data.
func (k KE) IsValid() bool { return len(k) > 4 }
func (k KE) Group() uint16 { return binary.BigEndian.Uint16(k) }
func (k KE) Data() []byte  { return k[4:] }
func AppendKE(dst []byte, group uint16, data []byte) []byte {
	dst = append(dst, byte(group>>8), byte(group), 0, 0)
	return append(dst, data...)
}

// NotifyType is a Notify message type (RFC 7296 §3.10.1); below 16384 an
// error, from 16384 a status.
type NotifyType uint16

const (
	UnsupportedCriticalPayload NotifyType = 1
	InvalidIKESPI              NotifyType = 4
	InvalidMajorVersion        NotifyType = 5
	InvalidSyntax              NotifyType = 7
	InvalidMessageID           NotifyType = 9
	InvalidSPI                 NotifyType = 11
	NoProposalChosen           NotifyType = 14
	InvalidKEPayload           NotifyType = 17
	AuthenticationFailed       NotifyType = 24
	SinglePairRequired         NotifyType = 34
	NoAdditionalSAs            NotifyType = 35
	InternalAddressFailure     NotifyType = 36
	FailedCPRequired           NotifyType = 37
	TSUnacceptable             NotifyType = 38
	InvalidSelectors           NotifyType = 39
	TemporaryFailure           NotifyType = 43
	ChildSANotFound            NotifyType = 44
	// StateNotFound (RFC 9370 §2.2.4) answers an IKE_FOLLOWUP_KE whose
	// CREATE_CHILD_SA the responder does not hold.
	StateNotFound NotifyType = 47

	InitialContact            NotifyType = 16384
	SetWindowSize             NotifyType = 16385
	AdditionalTSPossible      NotifyType = 16386
	IPCompSupported           NotifyType = 16387
	NATDetectionSourceIP      NotifyType = 16388
	NATDetectionDestinationIP NotifyType = 16389
	Cookie                    NotifyType = 16390
	UseTransportMode          NotifyType = 16391
	RekeySA                   NotifyType = 16393
	ESPTFCPaddingNotSupported NotifyType = 16394
	NonFirstFragmentsAlso     NotifyType = 16395
	MobikeSupported           NotifyType = 16396
	NoAdditionalAddresses     NotifyType = 16399
	MultipleAuthSupported     NotifyType = 16404
	RedirectSupported         NotifyType = 16406
	EAPOnlyAuthentication     NotifyType = 16417
	MessageIDSyncSupported    NotifyType = 16420
	FragmentationSupported    NotifyType = 16430
	SignatureHashAlgorithms   NotifyType = 16431
	// IntermediateExchangeSupported (RFC 9242 §3.1) announces
	// IKE_INTERMEDIATE in IKE_SA_INIT.
	IntermediateExchangeSupported NotifyType = 16438
	// AdditionalKeyExchange (RFC 9370 §2.2.4) links IKE_FOLLOWUP_KE
	// exchanges to their CREATE_CHILD_SA.
	AdditionalKeyExchange NotifyType = 16441
)

// IsError reports whether t is an error type (RFC 7296 §3.10.1).
func (t NotifyType) IsError() bool { return t < 16384 }

// Notify is the body of a Notify payload (RFC 7296 §3.10): protocol ID (1),
// SPI size (1), notify type (2), SPI, notification data.
type Notify []byte

// IsValid reports whether n holds its header and its SPI.
func (n Notify) IsValid() bool        { return len(n) >= 4 && len(n) >= 4+int(n[1]) }
func (n Notify) Protocol() ProtocolID { return ProtocolID(n[0]) }
func (n Notify) Type() NotifyType     { return NotifyType(binary.BigEndian.Uint16(n[2:])) }
func (n Notify) SPI() []byte          { return n[4 : 4+int(n[1])] }
func (n Notify) Data() []byte         { return n[4+int(n[1]):] }
func AppendNotify(dst []byte, proto ProtocolID, t NotifyType, spi, data []byte) []byte {
	dst = append(dst, byte(proto), byte(len(spi)), byte(t>>8), byte(t))
	dst = append(dst, spi...)
	return append(dst, data...)
}

// Delete is the body of a Delete payload (RFC 7296 §3.11): protocol ID (1),
// SPI size (1), number of SPIs (2), SPIs.
type Delete []byte

// IsValid reports whether d's SPIs fill it exactly.
func (d Delete) IsValid() bool {
	return len(d) >= 4 && len(d)-4 == int(d[1])*int(binary.BigEndian.Uint16(d[2:]))
}
func (d Delete) Protocol() ProtocolID { return ProtocolID(d[0]) }

// SPIs returns the 4-byte SPIs of an ESP or AH delete (none for IKE,
// whose delete names the SA the message belongs to).
func (d Delete) SPIs() []uint32 {
	if d[1] != 4 {
		return nil
	}
	var s []uint32
	for b := d[4:]; len(b) >= 4; b = b[4:] {
		s = append(s, binary.BigEndian.Uint32(b))
	}
	return s
}
func AppendDelete(dst []byte, proto ProtocolID, spis []uint32) []byte {
	size := byte(4)
	if proto == ProtoIKE {
		size, spis = 0, nil
	}
	dst = append(dst, byte(proto), size, byte(len(spis)>>8), byte(len(spis)))
	for _, s := range spis {
		dst = binary.BigEndian.AppendUint32(dst, s)
	}
	return dst
}

// IDType is an identification type (RFC 7296 §3.5).
type IDType uint8

const (
	IDIPv4   IDType = 1
	IDFQDN   IDType = 2
	IDRFC822 IDType = 3
	IDIPv6   IDType = 5
	IDDN     IDType = 9
	IDKeyID  IDType = 11
)

// ID is the body of an IDi or IDr payload: ID type (1), reserved (3), data.
// The whole body is what the AUTH computation calls RestOfIDPayload.
type ID []byte

func (i ID) IsValid() bool { return len(i) > 4 }
func (i ID) Type() IDType  { return IDType(i[0]) }
func (i ID) Data() []byte  { return i[4:] }
func AppendID(dst []byte, t IDType, data []byte) []byte {
	return append(append(dst, byte(t), 0, 0, 0), data...)
}

// AuthMethod is an authentication method (RFC 7296 §3.8).
type AuthMethod uint8

// AuthSharedKey is the Shared Key Message Integrity Code; the signature
// methods are in cert.go.
const AuthSharedKey AuthMethod = 2

// Auth is the body of an AUTH payload: method (1), reserved (3), data.
type Auth []byte

func (a Auth) IsValid() bool      { return len(a) > 4 }
func (a Auth) Method() AuthMethod { return AuthMethod(a[0]) }
func (a Auth) Data() []byte       { return a[4:] }
func AppendAuth(dst []byte, m AuthMethod, data []byte) []byte {
	return append(append(dst, byte(m), 0, 0, 0), data...)
}

// Traffic selector types (RFC 7296 §3.13.1).
const (
	TSIPv4Range = 7
	TSIPv6Range = 8
)

// Selector is one traffic selector: an IP protocol (0 for any), a port
// range and an address range of one family.
type Selector struct {
	Proto              uint8
	StartPort, EndPort uint16
	Start, End         netip.Addr
}

// TS is the body of a TSi or TSr payload: number of TSs (1), reserved (3),
// then each selector as type (1), protocol (1), length (2), start port (2),
// end port (2), start address, end address.
type TS []byte

// Selectors decodes the selectors. A selector of an unknown type is an
// error: RFC 7296 gives no way to skip it safely in a narrowed answer.
func (t TS) Selectors() ([]Selector, error) {
	if len(t) < 4 || t[0] == 0 {
		return nil, ErrBadPayload
	}
	count := int(t[0])
	b := []byte(t[4:])
	out := make([]Selector, 0, count)
	for i := 0; i < count; i++ {
		if len(b) < 8 {
			return nil, ErrBadPayload
		}
		n := int(binary.BigEndian.Uint16(b[2:]))
		var alen int
		switch b[0] {
		case TSIPv4Range:
			alen = 4
		case TSIPv6Range:
			alen = 16
		default:
			return nil, ErrBadPayload
		}
		if n != 8+2*alen || n > len(b) {
			return nil, ErrBadPayload
		}
		s := Selector{Proto: b[1], StartPort: binary.BigEndian.Uint16(b[4:]), EndPort: binary.BigEndian.Uint16(b[6:])}
		s.Start, _ = netip.AddrFromSlice(b[8 : 8+alen])
		s.End, _ = netip.AddrFromSlice(b[8+alen : n])
		out = append(out, s)
		b = b[n:]
	}
	if len(b) != 0 {
		return nil, ErrBadPayload
	}
	return out, nil
}

// AppendTS appends the body of a TS payload holding ss. Each selector's
// addresses must be of one family; its family picks the type.
func AppendTS(dst []byte, ss []Selector) []byte {
	dst = append(dst, byte(len(ss)), 0, 0, 0)
	for _, s := range ss {
		typ, n := byte(TSIPv4Range), 16
		if s.Start.Is6() {
			typ, n = TSIPv6Range, 40
		}
		dst = append(dst, typ, s.Proto, 0, byte(n))
		dst = binary.BigEndian.AppendUint16(dst, s.StartPort)
		dst = binary.BigEndian.AppendUint16(dst, s.EndPort)
		dst = append(dst, s.Start.AsSlice()...)
		dst = append(dst, s.End.AsSlice()...)
	}
	return dst
}
