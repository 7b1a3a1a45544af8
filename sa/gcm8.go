package sa

import (
	"crypto/subtle"
	"encoding/binary"

	"github.com/ipsecd/ipsecd/sa/esp"
)

// AES-GCM with a 64-bit ICV (RFC 4106 §8 allows 8, 12 and 16 bytes; Linux
// takes icv 64). crypto/cipher checks tags of 12 to 16 bytes only, so
// sealing uses a full 16-byte tag and cuts it, and opening computes the
// full tag of the received packet with crypto/cipher's own GCM (assembly
// GHASH and CTR where the CPU has them) and compares 8 bytes of it:
//
// The tag is T = GHASH_H(A, C) xor E_K(J0) (NIST SP 800-38D §7.1). GCM's
// Seal of an empty plaintext under the packet's nonce, with additional
// data X = A zero-padded to 16 bytes followed by C, returns
// GHASH_H(X, "") xor E_K(J0). GHASH runs over the same blocks in both
// (pad(A), then C zero-padded); only the final length block differs,
// L_X = [8|X|, 0] instead of L = [8|A|, 8|C|]. As GHASH ends with
// (Y xor L)·H, T = Seal's tag xor (L_X xor L)·H, and that product is the
// XOR of x^i·H over the few bits set in the lengths, kept in a table.
//
// So a forged packet costs one GHASH pass over it, at crypto/cipher's
// speed, before it is refused, as with 128-bit ICVs; the bitwise GHASH
// this replaced made a forgery cost 80 times as much. A valid packet then
// costs a second pass: crypto/cipher's Open with the full tag decrypts it.

// ghashLenBits is how many low bits of each half of a length block the
// table covers: lengths below 2^21 bytes. An ESP packet is at most 64 KiB;
// longer ones take the bitwise multiplication.
const ghashLenBits = 24

// ghashLenTable holds x^i·H for the bits a GHASH length block can have
// set: [0][k] for bit k of its first (big-endian) 64-bit half, the AAD
// length, and [1][k] for bit k of its second, the ciphertext length. It
// is key material (H = E_K(0^128)).
type ghashLenTable [2][ghashLenBits][2]uint64

// newGHASHLenTable fills the table for the GHASH key h. In GCM's bit
// order (SP 800-38D §6.3), bit k of the first half is the coefficient of
// x^(63-k), bit k of the second that of x^(127-k).
func newGHASHLenTable(h [2]uint64) *ghashLenTable {
	tab := new(ghashLenTable)
	v := h // x^i·H
	for i := 0; i < 128; i++ {
		if k := 63 - i; k >= 0 && k < ghashLenBits {
			tab[0][k] = v
		}
		if k := 127 - i; i >= 64 && k < ghashLenBits {
			tab[1][k] = v
		}
		v = gfMulX(v)
	}
	return tab
}

// mul returns [hi, lo]·H, with hi and lo the halves of a length block.
func (tab *ghashLenTable) mul(hi, lo uint64, h [2]uint64) [2]uint64 {
	if hi>>ghashLenBits != 0 || lo>>ghashLenBits != 0 {
		return gfMul([2]uint64{hi, lo}, h)
	}
	var z [2]uint64
	for k := 0; hi != 0 || lo != 0; k, hi, lo = k+1, hi>>1, lo>>1 {
		// Branch-free: the lengths are public, but the table is not.
		mh, ml := -(hi & 1), -(lo & 1)
		z[0] ^= tab[0][k][0]&mh ^ tab[1][k][0]&ml
		z[1] ^= tab[0][k][1]&mh ^ tab[1][k][1]&ml
	}
	return z
}

// openGCM8 verifies the 8-byte tag of b and decrypts it in place.
func (t *transform) openGCM8(s *scratch, b esp.ESP, seq uint64, esn bool) bool {
	nonce, aad := t.nonceAAD(s, b, seq, esn)
	const hl = esp.HeaderLen + 8 // SPI, sequence number, IV
	ct := b.Encrypted(t.ivLen, t.icvLen)
	n := len(ct)

	// X = pad(A) ‖ C, in place of the header in front of C (kept in
	// hdr; the nonce and AAD are already in s).
	var hdr [hl]byte
	copy(hdr[:], b[:hl])
	copy(b[:hl], aad)
	clear(b[len(aad):hl])
	tag := t.aead.Seal(s[scratchMAC:scratchMAC], nonce, nil, b[:hl+n])
	copy(b[:hl], hdr[:])

	d := t.ghashLen.mul(uint64(8*(hl+n))^uint64(8*len(aad)), uint64(8*n), t.ghashH)
	binary.BigEndian.PutUint64(tag[0:], binary.BigEndian.Uint64(tag[0:])^d[0])
	binary.BigEndian.PutUint64(tag[8:], binary.BigEndian.Uint64(tag[8:])^d[1])
	if subtle.ConstantTimeCompare(tag[:8], b.ICV(8)) != 1 {
		return false
	}

	// Decrypt with crypto/cipher's Open and the full tag. It wants C ‖ T
	// in one slice and the ICV slot holds 8 bytes, so C moves 8 bytes
	// forward over the IV (in the nonce already), T goes behind it, and
	// the plaintext moves back to where the caller looks for it. Then the
	// IV and ICV are put back.
	work := b[hl-8:] // n+16 bytes
	copy(work, ct)
	copy(work[n:], tag)
	if _, err := t.aead.Open(work[:0], nonce, work, aad); err != nil {
		return false // cannot happen: T was computed for this C
	}
	copy(b[hl:hl+n], work[:n])
	copy(b[hl-8:hl], hdr[hl-8:])
	copy(b.ICV(8), tag[:8])
	return true
}

// gfMulX returns v·x in GF(2^128) with GCM's bit order: one step of
// SP 800-38D Algorithm 1.
func gfMulX(v [2]uint64) [2]uint64 {
	lsb := v[1] & 1
	v[1] = v[1]>>1 | v[0]<<63
	v[0] = v[0]>>1 ^ (0xe1<<56)&-lsb
	return v
}

// gfMul multiplies in GF(2^128) with GCM's bit order (SP 800-38D
// Algorithm 1); x[0] holds bytes 0-7 big-endian.
func gfMul(x, y [2]uint64) [2]uint64 {
	var z [2]uint64
	v := y
	for i := 0; i < 128; i++ {
		w := x[i>>6]
		bit := (w >> (63 - uint(i&63))) & 1
		m := -bit
		z[0] ^= v[0] & m
		z[1] ^= v[1] & m
		v = gfMulX(v)
	}
	return z
}
