package sa

// Linux names of the transforms New accepts.
const (
	AlgGCM      = "rfc4106(gcm(aes))"
	AlgChaCha   = "rfc7539esp(chacha20,poly1305)"
	AlgCBC      = "cbc(aes)"
	AlgNull     = "ecb(cipher_null)"
	AlgHMACSHA2 = "hmac(sha256)"
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
}

// The algorithms, in the order RFC 8221 ranks them: the only table of
// them. Check takes its limits from it, FillDefaults its defaults, and
// the front ends (config, control, genkey) their lists of names.
var algorithms = []AlgorithmInfo{
	{Name: AlgGCM, Kind: KindAEAD, KeyBytes: []int{20, 36}, SaltBytes: 4, Bits: []int{64, 96, 128}, DefaultBits: 128},
	{Name: AlgChaCha, Kind: KindAEAD, KeyBytes: []int{36}, SaltBytes: 4, Bits: []int{128}, DefaultBits: 128},
	{Name: AlgCBC, Kind: KindEnc, KeyBytes: []int{16, 24, 32}},
	{Name: AlgNull, Kind: KindEnc},
	// Linux accepts other truncations of hmac(sha256); RFC 4868 and the
	// codec use 128 bits only.
	{Name: AlgHMACSHA2, Kind: KindAuth, KeyBytes: []int{32}, Bits: []int{128}, DefaultBits: 128},
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
