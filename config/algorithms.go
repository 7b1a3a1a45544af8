package config

import (
	"fmt"
	"strings"
)

// AlgorithmKind says where an algorithm goes in a state.
type AlgorithmKind string

const (
	KindAEAD AlgorithmKind = "aead" // combined mode: aead
	KindEnc  AlgorithmKind = "enc"  // encryption only: enc, with auth
	KindAuth AlgorithmKind = "auth" // integrity: auth, with enc
)

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
}

// The algorithms, in the order RFC 8221 ranks them.
var algorithms = []AlgorithmInfo{
	{Name: "rfc4106(gcm(aes))", Kind: KindAEAD, KeyBytes: []int{20, 36}, SaltBytes: 4, Bits: []int{64, 96, 128}, DefaultBits: 128},
	{Name: "rfc7539esp(chacha20,poly1305)", Kind: KindAEAD, KeyBytes: []int{36}, SaltBytes: 4, Bits: []int{128}, DefaultBits: 128},
	{Name: "cbc(aes)", Kind: KindEnc, KeyBytes: []int{16, 24, 32}},
	{Name: "ecb(cipher_null)", Kind: KindEnc},
	// Linux accepts other truncations of hmac(sha256); RFC 4868 and the
	// codec use 128 bits only.
	{Name: "hmac(sha256)", Kind: KindAuth, KeyBytes: []int{32}, Bits: []int{128}, DefaultBits: 128},
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

// algorithmNames lists the algorithms of a kind for an error message.
func algorithmNames(kind AlgorithmKind) string {
	return orList(algorithmList(kind))
}

// algorithmList returns the names of the algorithms of a kind.
func algorithmList(kind AlgorithmKind) []string {
	var names []string
	for _, a := range algorithms {
		if a.Kind == kind {
			names = append(names, a.Name)
		}
	}
	return names
}

// orList joins "a", "a or b", "a, b or c".
func orList[T any](xs []T) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	if len(s) <= 1 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
