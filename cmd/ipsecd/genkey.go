package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strings"

	"github.com/ipsecd/ipsecd/sa"
)

// cmdGenkey is `ipsecd genkey --alg ALG [--bits N]`: fresh key material for
// ALG from crypto/rand, salt included, as 0x-hex. --bits picks the cipher
// key size where the algorithm has several (128, 192, 256); the default is
// the smallest, e.g. AES-128 for rfc4106(gcm(aes)) (16 + 4 salt bytes).
func cmdGenkey(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("genkey", "genkey --alg ALG [--bits N]", stderr)
	var names []string
	for _, a := range sa.Algorithms() {
		if len(a.KeyBytes) > 0 {
			names = append(names, a.Name)
		}
	}
	alg := fs.String("alg", "", "the algorithm, by its Linux name: "+strings.Join(names, ", "))
	bits := fs.Int("bits", 0, "cipher key size in bits, salt not counted (default: the smallest)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *alg == "" {
		return usagef("--alg is required: one of %s", strings.Join(names, ", "))
	}
	n, err := keyBytes(*alg, *bits)
	if err != nil {
		return &usageError{err.Error()}
	}
	// The key and its text are zeroed once written.
	key := make([]byte, n)
	defer clear(key)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	text := make([]byte, 2+hex.EncodedLen(n)+1)
	defer clear(text)
	copy(text, "0x")
	hex.Encode(text[2:], key)
	text[len(text)-1] = '\n'
	_, err = stdout.Write(text)
	return err
}

// keyBytes returns the key material length for alg with a bits-bit cipher
// key (0: the smallest).
func keyBytes(alg string, bits int) (int, error) {
	info, ok := sa.LookupAlgorithm(alg)
	if !ok {
		return 0, fmt.Errorf("unknown algorithm %q", alg)
	}
	if len(info.KeyBytes) == 0 {
		return 0, fmt.Errorf("%s takes no key", alg)
	}
	if bits == 0 {
		return info.KeyBytes[0], nil
	}
	var sizes []string
	for _, n := range info.KeyBytes {
		kb := (n - info.SaltBytes) * 8
		if kb == bits {
			return n, nil
		}
		sizes = append(sizes, fmt.Sprint(kb))
	}
	return 0, fmt.Errorf("%s takes --bits %s, not %d", alg, strings.Join(sizes, " or "), bits)
}

// authNames lists the integrity algorithms of sa's table, for --auth's help.
func authNames() []string {
	var names []string
	for _, a := range sa.Algorithms() {
		if a.Kind == sa.KindAuth {
			names = append(names, a.Name)
		}
	}
	return names
}
