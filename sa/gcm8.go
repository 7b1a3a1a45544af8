package sa

import (
	"crypto/subtle"
	"encoding/binary"

	"github.com/ipsecd/ipsecd/sa/esp"
)

// AES-GCM with a 64-bit ICV (RFC 4106 §8 allows 8, 12 and 16 bytes; Linux
// takes icv 64). crypto/cipher refuses tags under 12 bytes, so sealing uses
// a full 16-byte tag and cuts it, and opening checks the truncated tag here
// (NIST SP 800-38D §6.4, §7.2) with a bitwise GHASH and CTR on the block
// cipher. It is slow, and meant only for peers that insist on 64-bit ICVs.

// openGCM8 verifies the 8-byte tag of b and decrypts it in place.
func (t *transform) openGCM8(s *[64]byte, b esp.ESP, seq uint64, esn bool) bool {
	nonce, aad := t.nonceAAD(s, b, seq, esn)
	ct := b.Encrypted(t.ivLen, t.icvLen)

	var y [2]uint64
	y = t.ghashBlocks(y, aad)
	y = t.ghashBlocks(y, ct)
	y[0] ^= uint64(len(aad)) * 8
	y[1] ^= uint64(len(ct)) * 8
	y = gfMul(y, t.ghashH)

	// E_K(J0), J0 = nonce | 1, in scratchMAC.
	ctr := s[scratchMAC : scratchMAC+16]
	copy(ctr, nonce)
	binary.BigEndian.PutUint32(ctr[12:], 1)
	t.block.Encrypt(ctr, ctr)
	binary.BigEndian.PutUint64(ctr[0:], binary.BigEndian.Uint64(ctr[0:])^y[0])
	if subtle.ConstantTimeCompare(ctr[:8], b.ICV(8)) != 1 {
		return false
	}

	// CTR decryption from counter 2. The nonce is rewritten (scratchNonce
	// is 16 bytes wide) and the keystream goes to scratchMAC.
	cb := s[scratchNonce : scratchNonce+16]
	ks := s[scratchMAC : scratchMAC+16]
	for i, c := 0, uint32(2); i < len(ct); i, c = i+16, c+1 {
		binary.BigEndian.PutUint32(cb[12:], c)
		t.block.Encrypt(ks, cb)
		subtle.XORBytes(ct[i:], ct[i:], ks)
	}
	return true
}

// ghashBlocks folds data, zero padded to 16 bytes, into y.
func (t *transform) ghashBlocks(y [2]uint64, data []byte) [2]uint64 {
	for len(data) > 0 {
		var blk [16]byte
		n := copy(blk[:], data)
		data = data[n:]
		y[0] ^= binary.BigEndian.Uint64(blk[:8])
		y[1] ^= binary.BigEndian.Uint64(blk[8:])
		y = gfMul(y, t.ghashH)
	}
	return y
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
		lsb := v[1] & 1
		v[1] = v[1]>>1 | v[0]<<63
		v[0] = v[0]>>1 ^ (0xe1<<56)&-lsb
	}
	return z
}
