// Package keytext reads key material written as hex text: a value of the
// config file (key: "0x..."), a command-line or control socket argument,
// or a key file (the config's key_file, the CLI's @FILE). It is the one
// reader of keys for all of them, so that each refuses the same malformed
// key with the same words and warns about the same exposed file.
//
// Key material never appears in its errors or warnings, nor does a path
// that was given where a key file's name belongs (it may be a key). It
// zeroes the buffers it reads keys through; the keys it returns are the
// caller's to zero.
package keytext

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// HexDigits is the shortest run of hex digits taken for key material: 8
// bytes, half the shortest key (cbc(aes) with AES-128).
const HexDigits = 16

// LooksLikeKey reports whether s holds a run of HexDigits or more hex
// digits, as a key pasted into the wrong field would. Messages leave such
// a value out.
func LooksLikeKey(s string) bool {
	run := 0
	for i := 0; i < len(s); i++ {
		if isHex(s[i]) {
			if run++; run >= HexDigits {
				return true
			}
		} else {
			run = 0
		}
	}
	return false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// ParseHex reads key material written as 0x-prefixed hex, as a config
// value or an argument gives it. Its errors never quote s.
func ParseHex(s string) ([]byte, error) {
	digits, ok := strings.CutPrefix(s, "0x")
	if !ok {
		if digits, ok = strings.CutPrefix(s, "0X"); !ok {
			return nil, errors.New("want 0x-prefixed hex")
		}
	}
	b := []byte(digits)
	defer clear(b)
	return decode(b)
}

// decode decodes hex digits into a new key. A stray character is "not
// hex" before an odd count is counted, so that a key with one wrong
// character says what is wrong with it.
func decode(digits []byte) ([]byte, error) {
	k := make([]byte, hex.DecodedLen(len(digits)))
	_, err := hex.Decode(k, digits)
	switch {
	case errors.Is(err, hex.ErrLength):
		clear(k)
		return nil, fmt.Errorf("odd number of hex digits (%d)", len(digits))
	case err != nil:
		clear(k)
		return nil, errNotHex
	}
	return k, nil
}

var errNotHex = errors.New("not hex")

// parseFile reads the hex text of a key file: white space around it and
// the 0x prefix are optional.
func parseFile(data []byte) ([]byte, error) {
	b := bytes.TrimSpace(data)
	if len(b) >= 2 && b[0] == '0' && (b[1] == 'x' || b[1] == 'X') {
		b = b[2:]
	}
	k, err := decode(b)
	switch {
	case errors.Is(err, errNotHex):
		return nil, errors.New("the file does not hold hex (want the key as hex text, 0x optional)")
	case err != nil:
		return nil, fmt.Errorf("the file holds an %v", err)
	}
	return k, nil
}
