package keys

import (
	"crypto/hmac"
	"hash"

	"github.com/ipsecd/ipsecd/ike/proposal"
)

// PRF is a pseudorandom function of RFC 7296 §2.13: HMAC with a SHA-2
// hash (PRF_HMAC_SHA2_256/384/512, RFC 4868).
type PRF struct {
	hash func() hash.Hash
	size int
}

// NewPRF returns the PRF of a proposal.Alg of type PRF.
func NewPRF(a proposal.Alg) PRF {
	h := a.Hash()
	return PRF{hash: h, size: h().Size()}
}

// Size is the PRF's output length in bytes (also the size of SK_d, SK_pi
// and SK_pr).
func (p PRF) Size() int { return p.size }

// Sum returns prf(key, data[0] | data[1] | ...).
func (p PRF) Sum(key []byte, data ...[]byte) []byte {
	m := hmac.New(p.hash, key)
	for _, d := range data {
		m.Write(d)
	}
	return m.Sum(nil)
}

// Plus returns the first n bytes of prf+(key, seed) (RFC 7296 §2.13):
// T1 | T2 | ..., with Ti = prf(key, T(i-1) | seed | i) and T0 empty. The
// counter is one octet, so at most 255 blocks exist; asking for more is a
// programmer error.
func (p PRF) Plus(key, seed []byte, n int) []byte {
	if n > 255*p.size {
		panic("keys: prf+ asked for more than 255 blocks")
	}
	out := make([]byte, 0, n+p.size)
	var t []byte
	m := hmac.New(p.hash, key)
	for i := 1; len(out) < n; i++ {
		m.Reset()
		m.Write(t)
		m.Write(seed)
		m.Write([]byte{byte(i)})
		t = m.Sum(t[:0])
		out = append(out, t...)
	}
	clear(out[n:])
	return out[:n]
}
