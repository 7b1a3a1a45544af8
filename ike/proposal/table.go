package proposal

import (
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"hash"
	"strings"

	"github.com/ipsecd/ipsecd/ike/dh"
	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/sa"
)

// Transform IDs (IANA "IKEv2 Parameters").
const (
	EncrAESCBC   = 12
	EncrAESGCM16 = 20
	EncrChaCha   = 28

	PRFSHA256 = 5
	PRFSHA384 = 6
	PRFSHA512 = 7

	IntegSHA1   = 2  // AUTH_HMAC_SHA1_96, RFC 2404: ESP only
	IntegSHA256 = 12 // AUTH_HMAC_SHA2_256_128
	IntegSHA384 = 13 // AUTH_HMAC_SHA2_384_192
	IntegSHA512 = 14 // AUTH_HMAC_SHA2_512_256

	NoESN = 0
	ESN   = 1
)

// Alg is one named transform.
type Alg struct {
	Name string
	Type message.TransformType
	ID   uint16
	// KeyLen is the Key Length attribute in bits (0: the transform has a
	// fixed key size and no attribute).
	KeyLen uint16
}

// Transform returns a's transform as carried in an SA payload.
func (a Alg) Transform() message.Transform {
	return message.Transform{Type: a.Type, ID: a.ID, KeyLen: a.KeyLen}
}

// Encryption algorithms.
var (
	AES128     = Alg{"aes128", message.TransENCR, EncrAESCBC, 128}
	AES192     = Alg{"aes192", message.TransENCR, EncrAESCBC, 192}
	AES256     = Alg{"aes256", message.TransENCR, EncrAESCBC, 256}
	AES128GCM  = Alg{"aes128gcm16", message.TransENCR, EncrAESGCM16, 128}
	AES256GCM  = Alg{"aes256gcm16", message.TransENCR, EncrAESGCM16, 256}
	ChaCha20P  = Alg{"chacha20poly1305", message.TransENCR, EncrChaCha, 0}
	PRF256     = Alg{"prfsha256", message.TransPRF, PRFSHA256, 0}
	PRF384     = Alg{"prfsha384", message.TransPRF, PRFSHA384, 0}
	PRF512     = Alg{"prfsha512", message.TransPRF, PRFSHA512, 0}
	Integ1     = Alg{"sha1", message.TransINTEG, IntegSHA1, 0}
	Integ256   = Alg{"sha256", message.TransINTEG, IntegSHA256, 0}
	Integ384   = Alg{"sha384", message.TransINTEG, IntegSHA384, 0}
	Integ512   = Alg{"sha512", message.TransINTEG, IntegSHA512, 0}
	MODP1024   = Alg{"modp1024", message.TransDH, dh.MODP1024, 0}
	MODP2048   = Alg{"modp2048", message.TransDH, dh.MODP2048, 0}
	ECP256     = Alg{"ecp256", message.TransDH, dh.ECP256, 0}
	ECP384     = Alg{"ecp384", message.TransDH, dh.ECP384, 0}
	X25519     = Alg{"x25519", message.TransDH, dh.X25519, 0}
	MLKEM768   = Alg{"mlkem768", message.TransDH, dh.MLKEM768, 0}
	MLKEM1024  = Alg{"mlkem1024", message.TransDH, dh.MLKEM1024, 0}
	ESNOn      = Alg{"esn", message.TransESN, ESN, 0}
	ESNOff     = Alg{"noesn", message.TransESN, NoESN, 0}
	algs       = []Alg{AES128, AES192, AES256, AES128GCM, AES256GCM, ChaCha20P, PRF256, PRF384, PRF512, Integ1, Integ256, Integ384, Integ512, MODP1024, MODP2048, ECP256, ECP384, X25519, MLKEM768, MLKEM1024, ESNOn, ESNOff}
	aliases    = map[string]Alg{"curve25519": X25519, "aes128gcm": AES128GCM, "aes256gcm": AES256GCM}
	integToPRF = map[uint16]Alg{IntegSHA256: PRF256, IntegSHA384: PRF384, IntegSHA512: PRF512}
)

// Lookup returns the Alg with the given name (or one of strongSwan's
// aliases: curve25519, aes128gcm, aes256gcm), or an additional key
// exchange as swanctl writes it (ke1_mlkem768, ke2_x25519, ke1_none;
// see addKE.go).
func Lookup(name string) (Alg, bool) {
	if a, ok := lookupAddKE(name); ok {
		return a, true
	}
	for _, a := range algs {
		if a.Name == name {
			return a, true
		}
	}
	a, ok := aliases[name]
	return a, ok
}

// ByTransform returns the Alg of a transform, and false for a transform
// ipsecd does not implement.
func ByTransform(t message.Transform) (Alg, bool) {
	if t.UnknownAttr {
		return Alg{}, false
	}
	if t.Type.IsAddKE() {
		return addKEOf(t.Type, t.ID)
	}
	for _, a := range algs {
		if a.Type == t.Type && a.ID == t.ID && a.KeyLen == t.KeyLen {
			return a, true
		}
	}
	return Alg{}, false
}

// ESP returns the algorithm of package sa that runs a in ESP, and the
// transform's line of sa's table (key material, ICV), from sa's table of
// algorithms: the one place where IKE's names meet the SA's. ok is false
// for an algorithm that is not ENCR or INTEG, or that no SA runs: Parse
// refuses such an ESP proposal, and Select never chooses one.
func (a Alg) ESP() (alg sa.AlgorithmInfo, t sa.IKEv2Transform, ok bool) {
	if a.Type != message.TransENCR && a.Type != message.TransINTEG {
		return sa.AlgorithmInfo{}, sa.IKEv2Transform{}, false
	}
	return sa.LookupIKEv2(a.Type == message.TransINTEG, a.ID, a.KeyLen)
}

// espNames lists the ENCR and INTEG algorithms that ESP runs, for errors.
func espNames() string {
	var names []string
	for _, a := range algs {
		if _, _, ok := a.ESP(); ok {
			names = append(names, a.Name)
		}
	}
	return strings.Join(names, ", ")
}

// IsLegacy reports whether a is an algorithm ipsecd implements only for
// peers that still ask for it: modp1024 (RFC 2409's group 2, about 80-bit
// strength; RFC 8247 §2.4: SHOULD NOT). The config offers one only when a
// preset or an explicit option asks for it, and warns.
func (a Alg) IsLegacy() bool { return a.Type == message.TransDH && a.ID == dh.MODP1024 }

// IsESPOnly reports whether a is for ESP proposals only: sha1
// (AUTH_HMAC_SHA1_96), which Windows' built-in client offers for ESP by
// default (RFC 8221: MUST- for ESP) but which IKE's own SA does not take:
// it has no PRF of its hash here (prfsha1), and RFC 8247 ranks it MUST-
// for IKE too, where every client this serves offers SHA-2.
func (a Alg) IsESPOnly() bool { return a.Type == message.TransINTEG && a.ID == IntegSHA1 }

// IsAEAD reports whether an encryption algorithm also authenticates (no
// integrity transform goes with it).
func (a Alg) IsAEAD() bool { return a.Type == message.TransENCR && a.ID != EncrAESCBC }

// KeySize is the number of key bytes an encryption algorithm takes from
// the key material, the 4-byte salt of the AEADs included (RFC 5282 §7.1,
// RFC 7634 §2), or an integrity algorithm's key size (RFC 4868 §2.1.1).
func (a Alg) KeySize() int {
	switch a.Type {
	case message.TransENCR:
		switch a.ID {
		case EncrChaCha:
			return 32 + 4
		case EncrAESGCM16:
			return int(a.KeyLen)/8 + 4
		}
		return int(a.KeyLen) / 8
	case message.TransINTEG:
		return a.Hash()().Size()
	}
	return 0
}

// ICVSize is an integrity algorithm's truncated output (RFC 4868: half the
// hash; RFC 2404: 96 bits of SHA-1's 160), or an AEAD's tag size.
func (a Alg) ICVSize() int {
	if a.Type == message.TransINTEG && a.ID == IntegSHA1 {
		return 12
	}
	if a.Type == message.TransINTEG {
		return a.Hash()().Size() / 2
	}
	return 16
}

// Hash returns the hash of a PRF or integrity algorithm.
func (a Alg) Hash() func() hash.Hash {
	switch {
	case a.Type == message.TransINTEG && a.ID == IntegSHA1:
		return sha1.New
	case a.Type == message.TransPRF && a.ID == PRFSHA256, a.Type == message.TransINTEG && a.ID == IntegSHA256:
		return sha256.New
	case a.Type == message.TransPRF && a.ID == PRFSHA384, a.Type == message.TransINTEG && a.ID == IntegSHA384:
		return sha512.New384
	case a.Type == message.TransPRF && a.ID == PRFSHA512, a.Type == message.TransINTEG && a.ID == IntegSHA512:
		return sha512.New
	}
	panic("proposal: Hash of " + a.Name)
}
