package sa

import (
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"hash"
)

// Linux names of the transforms New accepts.
const (
	AlgGCM        = "rfc4106(gcm(aes))"
	AlgChaCha     = "rfc7539esp(chacha20,poly1305)"
	AlgCBC        = "cbc(aes)"
	AlgNull       = "ecb(cipher_null)"
	AlgHMACSHA2   = "hmac(sha256)"
	AlgHMACSHA1   = "hmac(sha1)"
	AlgHMACSHA384 = "hmac(sha384)"
	AlgHMACSHA512 = "hmac(sha512)"
)

// AlgorithmKind says where an algorithm goes in a Config; its text is the
// config file's name of that field.
type AlgorithmKind string

const (
	KindAEAD AlgorithmKind = "aead" // combined mode: AEAD
	KindEnc  AlgorithmKind = "enc"  // encryption only: Enc, with Auth
	KindAuth AlgorithmKind = "auth" // integrity: Auth, with Enc
)

// BitsField names an algorithm's Bits as the config file does: icv_bits
// for an AEAD, trunc_bits for integrity; "" for encryption, which has
// none.
func (k AlgorithmKind) BitsField() string {
	switch k {
	case KindAEAD:
		return "icv_bits"
	case KindAuth:
		return "trunc_bits"
	}
	return ""
}

// AlgorithmInfo describes one algorithm ipsecd implements, by its Linux name.
type AlgorithmInfo struct {
	Name string
	Kind AlgorithmKind
	// KeyBytes are the accepted key material lengths, salt included,
	// shortest first. Empty for an algorithm without a key.
	KeyBytes []int
	// SaltBytes is the part of KeyBytes that is salt (4 for the AEADs).
	SaltBytes int
	// Bits are the accepted icv_bits (AEAD) or trunc_bits (auth); empty
	// for an encryption algorithm. DefaultBits is used when none is given.
	Bits        []int
	DefaultBits int
	// IKEv2 are the IKEv2 transforms that negotiate the algorithm for
	// ESP; IKE offers, accepts and installs exactly these (package
	// ike/proposal, ikenode), so that what it negotiates is what an SA
	// runs. Empty: not negotiable.
	IKEv2 []IKEv2Transform

	// hash is an integrity algorithm's hash, for HMAC.
	hash func() hash.Hash
}

// IKEv2Transform is one way IKEv2 names an algorithm for ESP (RFC 7296
// §3.3.2, IANA "IKEv2 Parameters"): a transform of type ENCR for an AEAD
// or an encryption algorithm, INTEG for an integrity algorithm.
type IKEv2Transform struct {
	ID     uint16 // Transform ID
	KeyLen uint16 // Key Length attribute in bits; 0: the transform has none
	// KeyBytes is the key material the SA takes from the child's KEYMAT
	// (RFC 7296 §2.17), salt included: one of the algorithm's KeyBytes.
	KeyBytes int
	// Bits is the ICV it stands for, as the algorithm's Bits (0 for
	// encryption).
	Bits int
}

// IKEv2 transform IDs of the algorithms (IANA "IKEv2 Parameters").
const (
	ikeEncrAESCBC    = 12 // RFC 3602
	ikeEncrAESGCM16  = 20 // RFC 4106, 16-byte ICV
	ikeEncrChaCha    = 28 // RFC 7634
	ikeIntegSHA1     = 2  // AUTH_HMAC_SHA1_96, RFC 2404
	ikeIntegSHA2_256 = 12 // AUTH_HMAC_SHA2_256_128, RFC 4868
	ikeIntegSHA2_384 = 13 // AUTH_HMAC_SHA2_384_192, RFC 4868
	ikeIntegSHA2_512 = 14 // AUTH_HMAC_SHA2_512_256, RFC 4868
)

// The algorithms, in the order RFC 8221 ranks them: the only table of
// them. Check takes its limits from it, FillDefaults its defaults, and
// the front ends (config, control, genkey) their lists of names.
var algorithms = []AlgorithmInfo{
	{Name: AlgGCM, Kind: KindAEAD, KeyBytes: []int{20, 36}, SaltBytes: 4, Bits: []int{64, 96, 128}, DefaultBits: 128,
		IKEv2: []IKEv2Transform{{ikeEncrAESGCM16, 128, 20, 128}, {ikeEncrAESGCM16, 256, 36, 128}}},
	{Name: AlgChaCha, Kind: KindAEAD, KeyBytes: []int{36}, SaltBytes: 4, Bits: []int{128}, DefaultBits: 128,
		IKEv2: []IKEv2Transform{{ikeEncrChaCha, 0, 36, 128}}},
	{Name: AlgCBC, Kind: KindEnc, KeyBytes: []int{16, 24, 32},
		IKEv2: []IKEv2Transform{{ikeEncrAESCBC, 128, 16, 0}, {ikeEncrAESCBC, 192, 24, 0}, {ikeEncrAESCBC, 256, 32, 0}}},
	{Name: AlgNull, Kind: KindEnc},
	// The HMACs take a key as long as the hash's output (RFC 2404 §3,
	// RFC 4868 §2.1.1) and truncate it as RFC 4868 and RFC 2404 do, which
	// is also Linux's default for ESP. Linux accepts other truncations;
	// the IKEv2 transforms stand for these only.
	{Name: AlgHMACSHA2, Kind: KindAuth, KeyBytes: []int{32}, Bits: []int{128}, DefaultBits: 128,
		IKEv2: []IKEv2Transform{{ikeIntegSHA2_256, 0, 32, 128}}, hash: sha256.New},
	{Name: AlgHMACSHA512, Kind: KindAuth, KeyBytes: []int{64}, Bits: []int{256}, DefaultBits: 256,
		IKEv2: []IKEv2Transform{{ikeIntegSHA2_512, 0, 64, 256}}, hash: sha512.New},
	{Name: AlgHMACSHA384, Kind: KindAuth, KeyBytes: []int{48}, Bits: []int{192}, DefaultBits: 192,
		IKEv2: []IKEv2Transform{{ikeIntegSHA2_384, 0, 48, 192}}, hash: sha512.New384},
	// RFC 8221 §6: MUST- for ESP, kept for peers that offer nothing else
	// (Windows' built-in client by default).
	{Name: AlgHMACSHA1, Kind: KindAuth, KeyBytes: []int{20}, Bits: []int{96}, DefaultBits: 96,
		IKEv2: []IKEv2Transform{{ikeIntegSHA1, 0, 20, 96}}, hash: sha1.New},
}

// Algorithms returns every algorithm ipsecd implements.
func Algorithms() []AlgorithmInfo {
	return append([]AlgorithmInfo(nil), algorithms...)
}

// LookupAlgorithm returns the algorithm with the Linux name, and false if
// ipsecd has none by that name.
func LookupAlgorithm(name string) (AlgorithmInfo, bool) {
	for _, a := range algorithms {
		if a.Name == name {
			return a, true
		}
	}
	return AlgorithmInfo{}, false
}

// LookupIKEv2 returns the algorithm that an IKEv2 transform negotiates
// for ESP (one of type INTEG when integ is true, else of type ENCR, with
// ID id and Key Length attribute keyLen, 0 when it has none), and false
// when no SA can run it.
func LookupIKEv2(integ bool, id, keyLen uint16) (AlgorithmInfo, IKEv2Transform, bool) {
	for _, a := range algorithms {
		if (a.Kind == KindAuth) != integ {
			continue
		}
		for _, t := range a.IKEv2 {
			if t.ID == id && t.KeyLen == keyLen {
				return a, t, true
			}
		}
	}
	return AlgorithmInfo{}, IKEv2Transform{}, false
}

// algorithmNames returns the names of the algorithms of a kind.
func algorithmNames(kind AlgorithmKind) []string {
	var names []string
	for _, a := range algorithms {
		if a.Kind == kind {
			names = append(names, a.Name)
		}
	}
	return names
}

// FillDefaults gives each algorithm of c that names no Bits (icv_bits,
// trunc_bits) its default. The front ends call it once they have mapped
// their syntax, so that a state reads the same whether its file, request
// or command line gave the default or left it out. New takes a Config
// either way, and keeps it as given.
func (c *Config) FillDefaults() {
	for _, a := range []*Algorithm{c.AEAD, c.Enc, c.Auth} {
		if a != nil {
			a.Bits = a.bits()
		}
	}
}

// bits returns a's Bits, or its algorithm's default when it names none.
func (a *Algorithm) bits() int {
	if a.Bits != 0 {
		return a.Bits
	}
	info, _ := LookupAlgorithm(a.Name)
	return info.DefaultBits
}
