package sa

import (
	"crypto/sha256"
	"strings"
)

// KeyID identifies one secret key by a SHA-256 digest of its bytes, so
// that the key-reuse checks remember keys without holding them.
type KeyID [sha256.Size]byte

// KeyUse is one secret key of a Config: the field that holds it, named as
// in the config file (aead.key, enc.key, auth.key), and its KeyID.
//
// Each secret key may serve one SA only, whatever the directions and
// algorithms. A second SA with an SA's key starts its sequence numbers at
// 1 again, and AES-GCM and ChaCha20-Poly1305 take their nonces from them
// (RFC 4106 §3.1: never repeated under one key). That holds across
// directions too: with one key for an outbound and an inbound SA, both
// peers seal sequence 1, 2, ... under it. Check refuses one key in two
// fields of a Config; the config file, the daemon and the sidecar refuse
// a key that another SA has or had (KeyOwners).
type KeyUse struct {
	Field string
	ID    KeyID
}

// KeyUses returns the secret keys of c, one per algorithm that has a key.
// The 4-byte salt of an AEAD's key material is left out: the same cipher
// key under another salt is the same key. The digest leaves out the
// algorithm, so that one key in two algorithms (an AES key for
// rfc4106(gcm(aes)) and for cbc(aes)) is one key too.
func KeyUses(c *Config) []KeyUse {
	var uses []KeyUse
	for _, alg := range []struct {
		field string
		a     *Algorithm
	}{{"aead.key", c.AEAD}, {"enc.key", c.Enc}, {"auth.key", c.Auth}} {
		if alg.a == nil || len(alg.a.Key) == 0 {
			continue
		}
		key := alg.a.Key
		if info, ok := LookupAlgorithm(alg.a.Name); ok && info.SaltBytes > 0 && len(key) > info.SaltBytes {
			key = key[:len(key)-info.SaltBytes]
		}
		h := sha256.New()
		h.Write([]byte("ipsecd key\x00"))
		h.Write(key)
		u := KeyUse{Field: alg.field}
		h.Sum(u.ID[:0])
		uses = append(uses, u)
	}
	return uses
}

// SharedKey returns the first of uses whose key an earlier one holds too:
// its field and the earlier one's. found is false when each key is
// another.
func SharedKey(uses []KeyUse) (field, earlier string, found bool) {
	for i, u := range uses {
		for _, prev := range uses[:i] {
			if prev.ID == u.ID {
				return u.Field, prev.Field, true
			}
		}
	}
	return "", "", false
}

// KeyOwner is the SA that holds or held a key, described for error
// messages ("states[0]", "spi 0x1001 dir out dst 192.0.2.2"), and the
// field of that SA that holds it (aead.key).
type KeyOwner struct {
	SA, Field string
}

// String returns "SA, Field"; for an SA named by its config path
// (states[0]), "states[0].aead.key"; without an SA, the field alone.
func (o KeyOwner) String() string {
	switch {
	case o.SA == "":
		return o.Field
	case strings.HasSuffix(o.SA, "]"):
		return o.SA + "." + o.Field
	}
	return o.SA + ", " + o.Field
}

// KeyOwners remembers which SA holds or held each key, by KeyID: each
// key may serve one SA only (KeyUse says why). It holds no key. A nil
// KeyOwners finds nothing; Add needs a non-nil one. It is not safe for
// concurrent use.
type KeyOwners map[KeyID]KeyOwner

// Conflict returns the first key of c that o holds, or that an earlier
// field of c holds too (then owner.SA is empty): the field of c that
// holds it and its other owner. found is false when c's keys are all
// its own.
func (o KeyOwners) Conflict(c *Config) (field string, owner KeyOwner, found bool) {
	uses := KeyUses(c)
	for _, u := range uses {
		if owner, ok := o[u.ID]; ok {
			return u.Field, owner, true
		}
	}
	if field, earlier, found := SharedKey(uses); found {
		return field, KeyOwner{Field: earlier}, true
	}
	return "", KeyOwner{}, false
}

// Add records every key of c as owned by the SA that owner describes; a
// key already recorded keeps its first owner.
func (o KeyOwners) Add(c *Config, owner string) {
	for _, u := range KeyUses(c) {
		if _, ok := o[u.ID]; !ok {
			o[u.ID] = KeyOwner{SA: owner, Field: u.Field}
		}
	}
}
