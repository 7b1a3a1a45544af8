package sa

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/subtle"
	"encoding/binary"
	"hash"
	"sync"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/ipsecd/ipsecd/sa/esp"
)

type suiteKind uint8

const (
	suiteAEAD suiteKind = iota + 1 // GCM (12- or 16-byte ICV) or ChaCha20-Poly1305
	suiteGCM8                      // GCM with a 64-bit ICV: crypto/cipher has no 8-byte tags
	suiteCBC                       // AES-CBC with an HMAC (hmac(sha1), hmac(sha256), ...)
	suiteNull                      // NULL encryption with an HMAC
)

// Offsets in Packet.scratch. The crypto interfaces get slices of this
// (heap) memory, so nothing escapes to a fresh allocation.
const (
	scratchNonce = 0  // 12 bytes: salt | IV (AEAD)
	scratchAAD   = 16 // 12 bytes: SPI | seq-hi | seq-lo, or 4 bytes seq-hi (HMAC ESN)
	scratchMAC   = 32 // 64 bytes: the HMAC's full output (SHA-512's is 64), or the GCM8 full tag
	scratchLen   = 96
)

// scratch is a packet's room for nonce, AAD and MAC (Packet.scratch).
type scratch = [scratchLen]byte

// transform is the crypto of one SA: immutable after newTransform, safe
// for concurrent use (per-call state comes from pool).
type transform struct {
	kind   suiteKind
	ivLen  int
	icvLen int
	align  int // the encrypted part is a multiple of this
	// icvWrite is how many bytes sealing writes after the encrypted part:
	// more than icvLen for GCM8, which seals with a full tag and truncates.
	icvWrite int

	aead cipher.AEAD // suiteAEAD, suiteGCM8
	salt [4]byte     // AEADs: the 4 bytes after the key

	block cipher.Block // suiteCBC

	// suiteGCM8: the GHASH key E_K(0^128), and its multiples for the
	// length block (gcm8.go).
	ghashH   [2]uint64
	ghashLen *ghashLenTable

	macKey  []byte
	macHash func() hash.Hash // the HMAC's hash, from the algorithm's row
	// pool holds *macState: HMAC and CBC states are not safe for concurrent
	// use and costly to create (CBC modes allocate), so each SA keeps a pool
	// and a steady state allocates nothing.
	pool sync.Pool
}

// macState is the per-call state of the HMAC suites.
type macState struct {
	mac hash.Hash
	enc cipher.BlockMode // nil for NULL
	dec cipher.BlockMode
}

type ivSetter interface{ SetIV([]byte) }

var zeroIV [aes.BlockSize]byte

func (t *transform) getState() *macState {
	if st, ok := t.pool.Get().(*macState); ok {
		return st
	}
	st := &macState{mac: hmac.New(t.macHash, t.macKey)}
	if t.block != nil {
		st.enc = cipher.NewCBCEncrypter(t.block, zeroIV[:])
		st.dec = cipher.NewCBCDecrypter(t.block, zeroIV[:])
	}
	return st
}

// newTransform builds the crypto of a config that check accepted.
func newTransform(cfg *Config) (*transform, error) {
	t := &transform{}
	if a := cfg.AEAD; a != nil {
		keyLen := len(a.Key) - 4
		copy(t.salt[:], a.Key[keyLen:])
		t.kind, t.ivLen, t.align = suiteAEAD, 8, 4
		t.icvLen = a.bits() / 8
		t.icvWrite = t.icvLen
		switch a.Name {
		case AlgGCM:
			block, err := aes.NewCipher(a.Key[:keyLen])
			if err != nil {
				return nil, err
			}
			tag := t.icvLen
			if tag == 8 {
				t.kind, tag, t.icvWrite = suiteGCM8, 16, 16
				var h [16]byte
				block.Encrypt(h[:], h[:])
				t.ghashH = [2]uint64{binary.BigEndian.Uint64(h[:8]), binary.BigEndian.Uint64(h[8:])}
				t.ghashLen = newGHASHLenTable(t.ghashH)
				clear(h[:])
			}
			aead, err := cipher.NewGCMWithTagSize(block, tag)
			if err != nil {
				return nil, err
			}
			t.aead = aead
		case AlgChaCha:
			aead, err := chacha20poly1305.New(a.Key[:keyLen])
			if err != nil {
				return nil, err
			}
			t.aead = aead
		}
		return t, nil
	}
	t.macKey = append([]byte(nil), cfg.Auth.Key...)
	info, _ := LookupAlgorithm(cfg.Auth.Name)
	t.macHash = info.hash
	t.icvLen = cfg.Auth.bits() / 8
	t.icvWrite = t.icvLen
	switch cfg.Enc.Name {
	case AlgCBC:
		block, err := aes.NewCipher(cfg.Enc.Key)
		if err != nil {
			return nil, err
		}
		t.kind, t.block, t.ivLen, t.align = suiteCBC, block, aes.BlockSize, aes.BlockSize
		st := t.getState()
		if _, ok := st.enc.(ivSetter); !ok {
			panic("sa: crypto/cipher CBC mode has no SetIV")
		}
		if _, ok := st.dec.(ivSetter); !ok {
			panic("sa: crypto/cipher CBC mode has no SetIV")
		}
		t.pool.Put(st)
	case AlgNull:
		t.kind, t.ivLen, t.align = suiteNull, 0, 4
	}
	return t, nil
}

// nonceAAD fills the AEAD nonce (salt | IV) and the AAD (SPI | seq-lo, or
// SPI | seq-hi | seq-lo with ESN: RFC 4106 §5, RFC 7634 §2.1) in scratch.
func (t *transform) nonceAAD(s *scratch, b esp.ESP, seq uint64, esn bool) (nonce, aad []byte) {
	copy(s[scratchNonce:], t.salt[:])
	copy(s[scratchNonce+4:], b.IV(8))
	nonce = s[scratchNonce : scratchNonce+12]
	binary.BigEndian.PutUint32(s[scratchAAD:], b.SPI())
	if esn {
		binary.BigEndian.PutUint32(s[scratchAAD+4:], uint32(seq>>32))
		binary.BigEndian.PutUint32(s[scratchAAD+8:], uint32(seq))
		return nonce, s[scratchAAD : scratchAAD+12]
	}
	binary.BigEndian.PutUint32(s[scratchAAD+4:], uint32(seq))
	return nonce, s[scratchAAD : scratchAAD+8]
}

// seal encrypts plain, the payload and trailer, into b and authenticates
// it. b runs from the SPI to the end of the ICV; SPI, sequence number and
// IV are written. plain is b's own encrypted part (sealing in place) or a
// buffer that does not overlap b at all. For GCM8, b has 8 bytes of room
// after the ICV (icvWrite).
func (t *transform) seal(s *scratch, b esp.ESP, plain []byte, seq uint64, esn bool) {
	enc := b.Encrypted(t.ivLen, t.icvLen)
	switch t.kind {
	case suiteAEAD, suiteGCM8:
		nonce, aad := t.nonceAAD(s, b, seq, esn)
		t.aead.Seal(enc[:0], nonce, plain, aad) // GCM8: the full tag, truncated by the caller's length
	case suiteCBC, suiteNull:
		st := t.getState()
		if t.kind == suiteCBC {
			st.enc.(ivSetter).SetIV(b.IV(t.ivLen))
			st.enc.CryptBlocks(enc, plain)
		} else {
			copy(enc, plain)
		}
		t.mac(st, s, b, seq, esn)
		copy(b.ICV(t.icvLen), s[scratchMAC:scratchMAC+t.icvLen])
		t.pool.Put(st)
	}
}

// mac computes the HMAC over SPI..next header, plus the ESN high bits
// (RFC 4303 §2.2.1), into s[scratchMAC:]. It takes no lock: st, from the
// transform's pool, belongs to the caller until it is put back.
func (t *transform) mac(st *macState, s *scratch, b esp.ESP, seq uint64, esn bool) {
	st.mac.Reset()
	st.mac.Write(b[:len(b)-t.icvLen])
	if esn {
		binary.BigEndian.PutUint32(s[scratchAAD:], uint32(seq>>32))
		st.mac.Write(s[scratchAAD : scratchAAD+4])
	}
	st.mac.Sum(s[scratchMAC:scratchMAC])
}

// openFrom verifies the ESP packet src and decrypts it into dst, a buffer
// of the same length (src itself to open in place; otherwise one that
// does not overlap it), and reports whether the ICV was right. On success
// dst.Encrypted holds the plaintext with its trailer; on failure the
// plaintext has been written nowhere (an AEAD clears what it wrote, the
// others check before they decrypt).
//
// The AEAD suites read src and write dst in one pass: a packet in a
// receive buffer shared with others is opened without a copy. The others
// copy it into dst first and open it there.
func (t *transform) openFrom(s *scratch, src, dst esp.ESP, seq uint64, esn bool) bool {
	if t.kind == suiteAEAD {
		nonce, aad := t.nonceAAD(s, src, seq, esn)
		ct := src[esp.HeaderLen+t.ivLen:]
		pt := dst[esp.HeaderLen+t.ivLen:]
		_, err := t.aead.Open(pt[:0], nonce, ct, aad)
		return err == nil
	}
	if &src[0] != &dst[0] {
		copy(dst, src)
	}
	return t.open(s, dst, seq, esn)
}

// open verifies and decrypts b in place and reports whether the ICV was
// right. On success b.Encrypted holds the plaintext with its trailer.
func (t *transform) open(s *scratch, b esp.ESP, seq uint64, esn bool) bool {
	switch t.kind {
	case suiteAEAD:
		return t.openFrom(s, b, b, seq, esn)
	case suiteGCM8:
		return t.openGCM8(s, b, seq, esn)
	default:
		st := t.getState()
		t.mac(st, s, b, seq, esn)
		ok := subtle.ConstantTimeCompare(s[scratchMAC:scratchMAC+t.icvLen], b.ICV(t.icvLen)) == 1
		if ok && t.kind == suiteCBC {
			st.dec.(ivSetter).SetIV(b.IV(t.ivLen))
			enc := b.Encrypted(t.ivLen, t.icvLen)
			st.dec.CryptBlocks(enc, enc)
		}
		t.pool.Put(st)
		return ok
	}
}
