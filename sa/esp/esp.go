// Package esp is the wire format of the IP Encapsulating Security Payload
// (RFC 4303 §2): the header, the trailer and their sizes. It parses and
// writes bytes in place and holds no state; it does not encrypt. Nothing in
// it allocates.
package esp

import "encoding/binary"

// An ESP packet as it travels, after the outer IP (and UDP) header
// (RFC 4303 §2, Figure 1; the IV is the first part of the payload data):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|               Security Parameters Index (SPI)                 |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                      Sequence Number                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    IV (optional, per suite)                   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Payload Data (variable)                    |
//	~                                                               ~
//	+               +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|               |     Padding (0-255 bytes)                     |
//	+-+-+-+-+-+-+-+-+               +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                               |  Pad Length   | Next Header   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Integrity Check Value (ICV, variable)                 |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
const (
	spiOffset = 0
	seqOffset = 4
)

const (
	// HeaderLen is the size of the SPI and sequence number fields.
	HeaderLen = 8
	// TrailerLen is the size of the pad length and next header fields.
	TrailerLen = 2
	// MaxPadLen is the largest padding the pad length field can express.
	MaxPadLen = 255

	// ProtocolNumber is ESP's IP protocol number.
	ProtocolNumber = 50

	// Next header values ESP cares about.
	NextHeaderIPv4  = 4  // tunnel mode, inner IPv4
	NextHeaderIPv6  = 41 // tunnel mode, inner IPv6
	NextHeaderDummy = 59 // "no next header": a dummy packet, RFC 4303 §2.6
)

// ESP is an ESP packet, from the SPI to the end of the ICV.
type ESP []byte

// IsValid reports whether b is long enough to be an ESP packet of a suite
// with an IV of ivLen bytes and an ICV of icvLen bytes, and whether the
// encrypted part (payload through next header) is a whole number of align
// byte blocks (align is a power of two: 4 for AEADs and NULL, the block
// size for CBC).
func (b ESP) IsValid(ivLen, icvLen, align int) bool {
	enc := len(b) - HeaderLen - ivLen - icvLen
	return enc >= TrailerLen && enc&(align-1) == 0
}

// SPI returns the Security Parameters Index. b must be at least HeaderLen
// long.
func (b ESP) SPI() uint32 { return binary.BigEndian.Uint32(b[spiOffset:]) }

// Seq returns the low 32 bits of the sequence number, as sent.
func (b ESP) Seq() uint32 { return binary.BigEndian.Uint32(b[seqOffset:]) }

// SetSPI writes the SPI.
func (b ESP) SetSPI(spi uint32) { binary.BigEndian.PutUint32(b[spiOffset:], spi) }

// SetSeq writes the low 32 bits of the sequence number.
func (b ESP) SetSeq(seq uint32) { binary.BigEndian.PutUint32(b[seqOffset:], seq) }

// IV returns the IV field.
func (b ESP) IV(ivLen int) []byte { return b[HeaderLen : HeaderLen+ivLen] }

// Encrypted returns the part that is encrypted: payload, padding, pad length
// and next header. b must satisfy IsValid.
func (b ESP) Encrypted(ivLen, icvLen int) []byte {
	return b[HeaderLen+ivLen : len(b)-icvLen]
}

// ICV returns the integrity check value at the end of b.
func (b ESP) ICV(icvLen int) []byte { return b[len(b)-icvLen:] }

// SPIOf returns the SPI of a packet that may be too short, and false if it
// is shorter than HeaderLen.
func SPIOf(b []byte) (uint32, bool) {
	if len(b) < HeaderLen {
		return 0, false
	}
	return ESP(b).SPI(), true
}

// PadLen returns how many padding bytes follow a payload of n bytes so that
// payload, padding and the two trailer bytes end on a multiple of align (a
// power of two).
func PadLen(n, align int) int {
	return (align - (n+TrailerLen)&(align-1)) & (align - 1)
}

// WriteTrailer writes the default padding 1, 2, 3, ... (RFC 4303 §2.4), the
// pad length and the next header into b, which must be exactly
// padLen+TrailerLen bytes long.
func WriteTrailer(b []byte, nextHeader uint8) {
	padLen := len(b) - TrailerLen
	for i := 0; i < padLen; i++ {
		b[i] = byte(i + 1)
	}
	b[padLen] = byte(padLen)
	b[padLen+1] = nextHeader
}

// ParseTrailer reads the trailer at the end of a decrypted payload (payload,
// padding, pad length, next header). It returns the length of the payload
// before the padding and the next header, and false if the pad length points
// before the start of plain or a padding byte is not the default 1, 2, 3, ...
// (RFC 4303 §2.4: the receiver should inspect it).
func ParseTrailer(plain []byte) (payloadLen int, nextHeader uint8, ok bool) {
	n := len(plain)
	if n < TrailerLen {
		return 0, 0, false
	}
	padLen := int(plain[n-2])
	nextHeader = plain[n-1]
	payloadLen = n - TrailerLen - padLen
	if payloadLen < 0 {
		return 0, 0, false
	}
	pad := plain[payloadLen : n-TrailerLen]
	for i, c := range pad {
		if c != byte(i+1) {
			return 0, 0, false
		}
	}
	return payloadLen, nextHeader, true
}
