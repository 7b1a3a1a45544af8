package message

import "encoding/binary"

// SKF is the body of an Encrypted Fragment payload (RFC 7383 §2.5),
// after its generic header:
//
//	                     1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|        Fragment Number        |        Total Fragments        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                     Initialization Vector                     |
//	~                      Encrypted content                        ~
//	~                    Integrity Checksum Data                    ~
//
// The fragment numbers are covered by the integrity check: they belong
// to the associated data, as the SK payload's generic header does.
type SKF []byte

// SKFHeaderLen is the size of the fragment number and total fields.
const SKFHeaderLen = 4

// IsValid reports whether f holds the fragment fields and numbers them
// sensibly (1 <= number <= total).
func (f SKF) IsValid() bool {
	return len(f) > SKFHeaderLen && f.Number() >= 1 && f.Number() <= f.Total()
}
func (f SKF) Number() uint16 { return binary.BigEndian.Uint16(f) }
func (f SKF) Total() uint16  { return binary.BigEndian.Uint16(f[2:]) }

// Encrypted returns what follows the fragment fields: the part that
// keys.SKCipher.Open takes as an SK payload's body.
func (f SKF) Encrypted() []byte { return f[SKFHeaderLen:] }
