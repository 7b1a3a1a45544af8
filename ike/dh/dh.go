// Package dh is the key exchange of IKEv2 (RFC 7296 §1.2, KE payload): the
// groups ipsecd offers, each a private key whose public value goes in a KE
// payload and whose shared secret, with the peer's public value, feeds
// SKEYSEED or a PFS KEYMAT.
//
//   - modp2048 (group 14, RFC 3526 §3), with math/big. The peer's value
//     must satisfy 1 < y < p-1 (RFC 7296 §5; NIST SP 800-56A), which keeps
//     out the values that force a known shared secret.
//   - modp1024 (group 2, RFC 2409 §6.2), the same way. It is legacy
//     (about 80-bit strength; RFC 8247 §2.4 says SHOULD NOT) and here
//     only because cloud gateways still ask for it: the proposal package
//     marks it Legacy, and the config accepts it only when asked to.
//   - ecp256 and ecp384 (groups 19 and 20, RFC 5903): the KE data is x ‖ y
//     without a point-format octet, the shared secret is x. crypto/ecdh
//     checks that the peer's point is on the curve.
//   - x25519 (group 31, RFC 8031): the KE data is the 32-byte u-coordinate;
//     an all-zero shared secret (a low-order point) is refused.
//   - mlkem768 and mlkem1024 (transform IDs 36 and 37, RFC 9370's key
//     exchange methods as draft-ietf-ipsecme-ikev2-mlkem assigns them),
//     with crypto/mlkem (FIPS 203). A KEM is not symmetric: the
//     initiator sends its encapsulation key, the responder answers with
//     a ciphertext made to it, and the initiator decapsulates. A Private
//     takes its role from its first call (see kem.go), so that the
//     engine drives both kinds alike: New, Public, Shared. ML-KEM-512
//     (35) has no implementation in the standard library and is not
//     offered.
//
// A Private is used once: for one exchange, then dropped. It is not safe
// for concurrent use; distinct ones are independent.
package dh

import (
	"crypto/ecdh"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math/big"
)

// Group numbers (IANA Transform Type 4), the one place ipsecd writes
// them: package proposal names these groups by them.
const (
	// None is no key exchange: a Transform Type 4 of ID 0 in an ESP
	// proposal offers a child without PFS. New refuses it.
	None      = 0
	MODP1024  = 2
	MODP2048  = 14
	ECP256    = 19
	ECP384    = 20
	X25519    = 31
	MLKEM512  = 35 // named for the error that refuses it; not implemented
	MLKEM768  = 36
	MLKEM1024 = 37
)

// ErrBadPublic means the peer's KE data is not a valid public value of
// the group. The exchange fails (INVALID_SYNTAX in a request).
var ErrBadPublic = errors.New("dh: invalid public value from the peer")

// ErrUnsupported means the group is not one ipsecd implements.
var ErrUnsupported = errors.New("dh: unsupported group")

// modpGroup is a MODP group: its prime (the generator is 2) and the size
// of the private exponents drawn for it.
type modpGroup struct {
	p        *big.Int
	len      int // bytes of p: KE data and shared secrets are this long
	expBytes int
}

func mustPrime(hex string) *big.Int {
	p, ok := new(big.Int).SetString(hex, 16)
	if !ok {
		panic("dh: bad prime")
	}
	return p
}

// modpGroups are the MODP groups by number. Exponents are twice the
// group's strength (RFC 3526 §8): 320 bits for modp2048's 112 (above the
// 224 asked), 256 bits for modp1024's 80.
var modpGroups = map[uint16]modpGroup{
	// RFC 3526 §3.
	MODP2048: {p: mustPrime(
		"FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74" +
			"020BBEA63B139B22514A08798E3404DDEF9519B3CD3A431B302B0A6DF25F1437" +
			"4FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED" +
			"EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF05" +
			"98DA48361C55D39A69163FA8FD24CF5F83655D23DCA3AD961C62F356208552BB" +
			"9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B" +
			"E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF695581718" +
			"3995497CEA956AE515D2261898FA051015728E5A8AACAA68FFFFFFFFFFFFFFFF"), len: 256, expBytes: 40},
	// RFC 2409 §6.2, the Second Oakley Group.
	MODP1024: {p: mustPrime(
		"FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74" +
			"020BBEA63B139B22514A08798E3404DDEF9519B3CD3A431B302B0A6DF25F1437" +
			"4FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED" +
			"EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE65381FFFFFFFFFFFFFFFF"), len: 128, expBytes: 32},
}

// modp2048P is group 14's prime (for the tests).
var modp2048P = modpGroups[MODP2048].p

// Private is one side's private key for one exchange.
type Private struct {
	group  uint16
	ec     *ecdh.PrivateKey
	modp   modpGroup
	x, pub *big.Int // MODP
	kem    *kem     // ML-KEM
}

// cleared reports whether Clear was called: it leaves neither a MODP
// exponent nor a curve key.
func (p *Private) cleared() bool { return p.x == nil && p.ec == nil && p.kem == nil }

func curve(group uint16) ecdh.Curve {
	switch group {
	case ECP256:
		return ecdh.P256()
	case ECP384:
		return ecdh.P384()
	case X25519:
		return ecdh.X25519()
	}
	return nil
}

// Supported reports whether New accepts group.
func Supported(group uint16) bool {
	_, modp := modpGroups[group]
	return modp || curve(group) != nil || isKEM(group)
}

// New makes a fresh private key of group from rand (crypto/rand when nil).
func New(group uint16, r io.Reader) (*Private, error) {
	if r == nil {
		r = rand.Reader
	}
	if isKEM(group) {
		return &Private{group: group, kem: &kem{}}, nil
	}
	if m, ok := modpGroups[group]; ok {
		x := make([]byte, m.expBytes)
		if _, err := io.ReadFull(r, x); err != nil {
			return nil, err
		}
		return FromPrivate(group, x)
	}
	c := curve(group)
	if c == nil {
		return nil, fmt.Errorf("%w %d", ErrUnsupported, group)
	}
	k, err := c.GenerateKey(r)
	if err != nil {
		return nil, err
	}
	return &Private{group: group, ec: k}, nil
}

// FromPrivate makes a private key of group from its encoding (a scalar for
// the curves, a big-endian exponent for MODP); for test vectors.
func FromPrivate(group uint16, b []byte) (*Private, error) {
	if m, ok := modpGroups[group]; ok {
		x := new(big.Int).SetBytes(b)
		if x.Sign() == 0 {
			return nil, errors.New("dh: zero exponent")
		}
		return &Private{group: group, modp: m, x: x, pub: new(big.Int).Exp(big.NewInt(2), x, m.p)}, nil
	}
	c := curve(group)
	if c == nil {
		return nil, fmt.Errorf("%w %d", ErrUnsupported, group)
	}
	k, err := c.NewPrivateKey(b)
	if err != nil {
		return nil, err
	}
	return &Private{group: group, ec: k}, nil
}

// ErrCleared means the private key was cleared (Clear): it computes
// nothing any more.
var ErrCleared = errors.New("dh: private key cleared")

// Clear wipes the private key once its exchange is over (or failed): a
// MODP exponent's words are zeroed; a curve's scalar lives inside
// crypto/ecdh, which cannot be zeroed from here, and is dropped, to
// become garbage. Shared then fails with ErrCleared. Clear of nil does
// nothing.
func (p *Private) Clear() {
	if p == nil {
		return
	}
	if p.x != nil {
		clear(p.x.Bits())
		p.x = nil
	}
	p.ec = nil
	p.kem.clear()
	p.kem = nil
}

// Group returns the group number.
func (p *Private) Group() uint16 { return p.group }

// Public returns the KE payload's data: our public value; for a KEM the
// initiator's encapsulation key or, after Shared, the responder's
// ciphertext.
func (p *Private) Public() []byte {
	if p.kem != nil {
		return p.kem.public(p.group)
	}
	if p.pub != nil {
		return p.pub.FillBytes(make([]byte, p.modp.len))
	}
	if p.ec == nil {
		return nil // cleared
	}
	b := p.ec.PublicKey().Bytes()
	if p.group != X25519 {
		b = b[1:] // drop the 0x04 uncompressed-point octet (RFC 5903 §7)
	}
	return b
}

// Shared returns g^ir from the peer's KE data, padded to the group's size
// as RFC 7296 §2.14 requires; for a KEM, the shared key (see kem.go).
func (p *Private) Shared(peer []byte) ([]byte, error) {
	if p.cleared() {
		return nil, ErrCleared
	}
	if p.kem != nil {
		return p.kem.shared(p.group, peer)
	}
	if p.x != nil {
		m := p.modp
		if len(peer) != m.len {
			return nil, ErrBadPublic
		}
		y := new(big.Int).SetBytes(peer)
		pm1 := new(big.Int).Sub(m.p, big.NewInt(1))
		if y.Cmp(big.NewInt(1)) <= 0 || y.Cmp(pm1) >= 0 {
			return nil, ErrBadPublic
		}
		return new(big.Int).Exp(y, p.x, m.p).FillBytes(make([]byte, m.len)), nil
	}
	if p.group != X25519 {
		peer = append([]byte{4}, peer...)
	}
	pub, err := p.ec.Curve().NewPublicKey(peer)
	if err != nil {
		return nil, ErrBadPublic
	}
	s, err := p.ec.ECDH(pub)
	if err != nil { // X25519: an all-zero result
		return nil, ErrBadPublic
	}
	return s, nil
}
