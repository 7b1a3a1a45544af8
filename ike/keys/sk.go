package keys

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"hash"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/ike/proposal"
)

// The Encrypted payload (RFC 7296 §3.14), after its generic header:
//
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                     Initialization Vector                     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	~                    Encrypted IKE Payloads                     ~
//	+               +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|               |             Padding (0-255 octets)            |
//	+-+-+-+-+-+-+-+-+                               +-+-+-+-+-+-+-+-+
//	|                                               |  Pad Length   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	~                    Integrity Checksum Data                    ~
//
// With an AEAD the checksum is the tag, and the associated data is the
// message from the IKE header to the end of the SK payload's generic
// header (RFC 5282 §5.1): everything before the IV.

// ErrAuth is the one error Open returns for a payload that does not
// authenticate or decrypt: drop the message, as if it never arrived
// (RFC 7296 §2.21.2), and count it.
var ErrAuth = errors.New("ike: SK payload failed to authenticate")

const aeadIVLen = 8

// SKCipher seals or opens the SK payloads of one direction of an IKE SA.
// The zero value is not usable; see NewSKCipher.
type SKCipher struct {
	aead cipher.AEAD // AES-GCM or ChaCha20-Poly1305
	salt [4]byte
	iv   uint64 // the next AEAD IV

	block cipher.Block // AES-CBC
	mac   func() hash.Hash
	macK  []byte
	icv   int
}

// cleared reports whether Clear was called: it leaves neither an AEAD
// nor a block cipher.
func (c *SKCipher) cleared() bool { return c.aead == nil && c.block == nil }

// NewSKCipher returns the cipher of suite s for one direction, from that
// direction's SK_e and SK_a (SK_ei and SK_ai for what the initiator
// sends). It keeps copies of the keys.
func NewSKCipher(s proposal.Suite, ske, ska []byte) (*SKCipher, error) {
	if len(ske) != s.Encr.KeySize() {
		return nil, errors.New("keys: SK_e has the wrong size")
	}
	c := &SKCipher{}
	switch s.Encr.ID {
	case proposal.EncrAESGCM16, proposal.EncrChaCha:
		k := ske[:len(ske)-4]
		copy(c.salt[:], ske[len(ske)-4:])
		var err error
		if s.Encr.ID == proposal.EncrChaCha {
			c.aead, err = chacha20poly1305.New(k)
		} else {
			var b cipher.Block
			if b, err = aes.NewCipher(k); err == nil {
				c.aead, err = cipher.NewGCM(b)
			}
		}
		if err != nil {
			return nil, err
		}
		c.icv = c.aead.Overhead()
	case proposal.EncrAESCBC:
		b, err := aes.NewCipher(ske)
		if err != nil {
			return nil, err
		}
		if len(ska) != s.Integ.KeySize() {
			return nil, errors.New("keys: SK_a has the wrong size")
		}
		c.block, c.mac, c.macK, c.icv = b, s.Integ.Hash(), append([]byte(nil), ska...), s.Integ.ICVSize()
	default:
		return nil, errors.New("keys: unsupported encryption " + s.Encr.Name)
	}
	return c, nil
}

func (c *SKCipher) ivLen() int {
	if c.aead != nil {
		return aeadIVLen
	}
	return aes.BlockSize
}

// Seal returns a whole message: the header h, then one SK payload whose
// first inner payload has type inner and which encrypts plain (an encoded
// payload chain). plain is not modified.
func (c *SKCipher) Seal(h message.HeaderFields, inner message.PayloadType, plain []byte) ([]byte, error) {
	return c.seal(h, message.TypeSK, inner, nil, plain)
}

// SealFragment returns one fragment of a message (RFC 7383 §2.5): the
// header h, then an SKF payload numbered num of total, which encrypts
// plain (a piece of an encoded payload chain). inner is the type of the
// chain's first payload in fragment 1, and NoNext in the others. The
// fragment numbers are authenticated with the header.
func (c *SKCipher) SealFragment(h message.HeaderFields, inner message.PayloadType, num, total uint16, plain []byte) ([]byte, error) {
	return c.seal(h, message.TypeSKF, inner, []byte{byte(num >> 8), byte(num), byte(total >> 8), byte(total)}, plain)
}

// Overhead returns how many bytes an SK or SKF payload adds to the plain
// payload chain it carries at most (IV, padding, pad length, checksum),
// besides its generic header and the SKF fragment fields.
func (c *SKCipher) Overhead() int {
	o := c.ivLen() + 1 + c.icv
	if c.aead == nil {
		o += aes.BlockSize - 1
	}
	return o
}

func (c *SKCipher) seal(h message.HeaderFields, typ, inner message.PayloadType, fields, plain []byte) ([]byte, error) {
	if c.cleared() {
		return nil, ErrCleared
	}
	ivLen := c.ivLen()
	// Padding: none is needed by the AEADs; CBC needs whole blocks.
	pad := 0
	if c.aead == nil {
		pad = (aes.BlockSize - (len(plain)+1)%aes.BlockSize) % aes.BlockSize
	}
	body := len(fields) + ivLen + len(plain) + pad + 1 + c.icv
	total := message.HeaderLen + message.PayloadHeaderLen + body
	if total > message.MaxLen {
		return nil, errors.New("keys: message too long")
	}
	out := make([]byte, 0, total)
	out = message.AppendHeader(out, h, typ, uint32(total))
	out = message.AppendPayloadHeader(out, inner, false, body)
	out = append(out, fields...)
	aad := len(out)
	out = out[:aad+ivLen]
	iv := out[aad:]
	if c.aead != nil {
		if c.iv == ^uint64(0) {
			return nil, errors.New("keys: IV space exhausted; rekey the IKE SA")
		}
		binary.BigEndian.PutUint64(iv, c.iv)
		c.iv++
	} else if _, err := rand.Read(iv); err != nil {
		return nil, err
	}
	start := len(out)
	out = append(out, plain...)
	out = append(out, make([]byte, pad)...)
	out = append(out, byte(pad))
	if c.aead != nil {
		var nonce [12]byte
		copy(nonce[:], c.salt[:])
		copy(nonce[4:], iv)
		out = c.aead.Seal(out[:start], nonce[:], out[start:], out[:aad])
		return out, nil
	}
	cipher.NewCBCEncrypter(c.block, iv).CryptBlocks(out[start:], out[start:])
	m := hmac.New(c.mac, c.macK)
	m.Write(out)
	return append(out, m.Sum(nil)[:c.icv]...), nil
}

// Open authenticates and decrypts the SK payload whose body skBody is the
// tail of msg (as message.Parse leaves it), and returns the inner payload
// chain without padding, in a new buffer. msg is not modified.
func (c *SKCipher) Open(msg, skBody []byte) ([]byte, error) {
	if c.cleared() {
		return nil, ErrAuth
	}
	ivLen := c.ivLen()
	aad := len(msg) - len(skBody)
	if aad < message.HeaderLen+message.PayloadHeaderLen || len(skBody) < ivLen+c.icv+1 {
		return nil, ErrAuth
	}
	iv := skBody[:ivLen]
	var plain []byte
	if c.aead != nil {
		var nonce [12]byte
		copy(nonce[:], c.salt[:])
		copy(nonce[4:], iv)
		var err error
		plain, err = c.aead.Open(nil, nonce[:], skBody[ivLen:], msg[:aad])
		if err != nil {
			return nil, ErrAuth
		}
	} else {
		ct := skBody[ivLen : len(skBody)-c.icv]
		m := hmac.New(c.mac, c.macK)
		m.Write(msg[:len(msg)-c.icv])
		if !hmac.Equal(m.Sum(nil)[:c.icv], skBody[len(skBody)-c.icv:]) || len(ct)%aes.BlockSize != 0 {
			return nil, ErrAuth
		}
		plain = make([]byte, len(ct))
		cipher.NewCBCDecrypter(c.block, iv).CryptBlocks(plain, ct)
	}
	if len(plain) == 0 {
		return nil, ErrAuth
	}
	pad := int(plain[len(plain)-1])
	if pad+1 > len(plain) {
		return nil, ErrAuth
	}
	return plain[:len(plain)-1-pad], nil
}

// Clear zeroes what the cipher holds of its keys (the integrity key and
// the AEAD salt) and drops the AEAD or block cipher, whose key schedule
// lives in crypto/aes, crypto/cipher or chacha20poly1305 objects that
// cannot be zeroed from here: they become garbage. A cleared cipher
// refuses to seal (ErrCleared) and opens nothing (ErrAuth).
func (c *SKCipher) Clear() {
	if c == nil {
		return
	}
	clear(c.macK)
	clear(c.salt[:])
	c.aead, c.block, c.mac, c.macK = nil, nil, nil, nil
}

// ErrCleared means the cipher was cleared: its IKE SA is over.
var ErrCleared = errors.New("keys: SK cipher cleared")
