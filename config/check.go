package config

import (
	"crypto/sha256"
	"fmt"
	"math"
	"net/netip"
	"strings"

	"github.com/ipsecd/ipsecd/sa"
)

// Limits of the values a state may take.
const (
	MinSPI          = 0x100              // SPIs 1..255 are reserved (RFC 4303 §2.1)
	MaxReplayWindow = sa.MaxReplayWindow // the SA's limit is sa's
	// DefaultReplayWindow is the window of an inbound state that names
	// none: RFC 4303 §3.4.3 prefers 64.
	DefaultReplayWindow = 64
	// maxSeconds keeps a lifetime in seconds inside a time.Duration.
	maxSeconds = math.MaxInt64 / 1000000000
)

// reporter receives one problem: a field path relative to the state or
// policy, and what is wrong with it.
type reporter func(field, msg string)

// CheckState checks an SA given on the command line or the control socket
// by the rules the config file applies to a state, except those that need
// the rest of a config (interfaces, duplicates). It returns nil or an
// ErrorList whose fields are named as in the config file (spi, aead.key).
func CheckState(c *sa.Config) error {
	var errs ErrorList
	checkState(c, func(field, msg string) {
		errs = append(errs, &Error{Field: field, Msg: msg})
	})
	if errs != nil {
		return errs
	}
	return nil
}

// CheckPolicy is CheckState for a policy.
func CheckPolicy(p *sa.Policy) error {
	var errs ErrorList
	checkPolicy(p, func(field, msg string) {
		errs = append(errs, &Error{Field: field, Msg: msg})
	})
	if errs != nil {
		return errs
	}
	return nil
}

func checkState(c *sa.Config, report reporter) {
	switch {
	case !c.Src.IsValid():
		report("src", "missing")
	case !c.Dst.IsValid():
		report("dst", "missing")
	case c.Src.Is4() != c.Dst.Is4():
		report("dst", fmt.Sprintf("%s is %s but src %s is %s", c.Dst, family(c.Dst), c.Src, family(c.Src)))
	}
	if c.SPI < MinSPI {
		report("spi", fmt.Sprintf("0x%08x is reserved; want 0x100..0xffffffff", c.SPI))
	}
	if c.Dir != sa.DirIn && c.Dir != sa.DirOut {
		report("dir", "missing; want in or out")
	}
	if c.Mode != sa.ModeTunnel && c.Mode != sa.ModeTransport {
		report("mode", "missing; want tunnel or transport")
	}
	if c.IfID == 0 {
		report("if_id", "missing or 0; want the if_id of an interface")
	}
	checkSuite(c, report)
	if c.Encap != nil {
		if c.Encap.SrcPort == 0 {
			report("encap.sport", "must not be 0")
		}
		if c.Encap.DstPort == 0 {
			report("encap.dport", "must not be 0")
		}
	}
	if c.ReplayWindow > MaxReplayWindow {
		report("replay_window", fmt.Sprintf("%d is too large; want 0..%d", c.ReplayWindow, MaxReplayWindow))
	}
	lt := &c.Lifetime
	if lt.SoftBytes != 0 && lt.HardBytes != 0 && lt.SoftBytes > lt.HardBytes {
		report("lifetime.soft_bytes", "is larger than hard_bytes")
	}
	if lt.SoftPackets != 0 && lt.HardPackets != 0 && lt.SoftPackets > lt.HardPackets {
		report("lifetime.soft_packets", "is larger than hard_packets")
	}
	if lt.SoftAdd < 0 || lt.HardAdd < 0 {
		report("lifetime", "negative duration")
	}
	if lt.SoftAdd != 0 && lt.HardAdd != 0 && lt.SoftAdd > lt.HardAdd {
		report("lifetime.soft_add_seconds", "is larger than hard_add_seconds")
	}
	checkSelector(c.Selector, "selector.", report)
}

// checkSuite checks the algorithms and their keys. Messages name the
// algorithm and the key's length, never its bytes.
func checkSuite(c *sa.Config, report reporter) {
	switch {
	case c.AEAD != nil && (c.Enc != nil || c.Auth != nil):
		report("aead", "set together with enc or auth; use aead alone, or enc with auth")
		return
	case c.AEAD == nil && c.Enc == nil && c.Auth == nil:
		report("aead", "missing; give aead, or enc with auth")
		return
	case c.AEAD == nil && c.Enc == nil:
		report("enc", "missing; auth needs enc (ecb(cipher_null) for integrity only)")
	case c.AEAD == nil && c.Auth == nil:
		report("auth", "missing; ESP without integrity is not supported, add auth hmac(sha256)")
	}
	if c.AEAD != nil {
		checkAlgorithm(c.AEAD, KindAEAD, "aead.", report)
	}
	if c.Enc != nil {
		checkAlgorithm(c.Enc, KindEnc, "enc.", report)
	}
	if c.Auth != nil {
		checkAlgorithm(c.Auth, KindAuth, "auth.", report)
	}
	// One key for encryption and integrity (a 32-byte cbc(aes) key as
	// the hmac(sha256) key) is a key with two uses.
	if f, other, found := KeyOwners(nil).Conflict(c); found {
		report(f, fmt.Sprintf("the same key as %s: each algorithm needs a key of its own (make one with ipsecd genkey)", other))
	}
}

func checkAlgorithm(a *sa.Algorithm, kind AlgorithmKind, prefix string, report reporter) {
	info, ok := LookupAlgorithm(a.Name)
	switch {
	case a.Name == "":
		report(prefix+"name", fmt.Sprintf("missing; want %s", algorithmNames(kind)))
		return
	case !ok:
		// The name is not shown: it may be a key pasted into the wrong
		// field.
		msg := "unknown algorithm; want " + algorithmNames(kind)
		switch {
		case looksLikeKey(a.Name):
			msg = "unknown algorithm: the value looks like key material (not shown), which goes in key or key_file; want " + algorithmNames(kind)
		case suggest(a.Name, algorithmList(kind)) != "":
			msg = "unknown algorithm; did you mean " + suggest(a.Name, algorithmList(kind)) + "?"
		}
		report(prefix+"name", msg)
		return
	case info.Kind != kind:
		report(prefix+"name", fmt.Sprintf("%s is not an %s algorithm; want %s", a.Name, kind, algorithmNames(kind)))
		return
	}
	switch {
	case len(info.KeyBytes) == 0 && len(a.Key) != 0:
		report(prefix+"key", fmt.Sprintf("%s takes no key, got %d bytes", a.Name, len(a.Key)))
	case len(info.KeyBytes) != 0 && len(a.Key) == 0:
		report(prefix+"key", fmt.Sprintf("missing; %s wants %s bytes", a.Name, orList(info.KeyBytes)))
	case len(info.KeyBytes) != 0 && !contains(info.KeyBytes, len(a.Key)):
		report(prefix+"key", fmt.Sprintf("%s wants %s bytes, got %d", a.Name, orList(info.KeyBytes), len(a.Key)))
	}
	field := "icv_bits"
	if kind == KindAuth {
		field = "trunc_bits"
	}
	switch {
	case len(info.Bits) == 0 && a.Bits != 0:
		report(prefix+field, fmt.Sprintf("%s has no %s", a.Name, field))
	case len(info.Bits) != 0 && a.Bits != 0 && !contains(info.Bits, a.Bits):
		report(prefix+field, fmt.Sprintf("%s allows %s, got %d", a.Name, orList(info.Bits), a.Bits))
	}
}

func checkPolicy(p *sa.Policy, report reporter) {
	if p.Dir != sa.DirIn && p.Dir != sa.DirOut {
		report("dir", "missing; want in or out")
	}
	if p.IfID == 0 {
		report("if_id", "missing or 0; want the if_id of an interface")
	}
	if p.Action != sa.ActionAllow && p.Action != sa.ActionBlock {
		report("action", "want allow or block")
	}
	checkSelector(p.Selector, "", report)
}

func checkSelector(s sa.Selector, prefix string, report reporter) {
	for _, f := range []struct {
		name string
		p    netip.Prefix
	}{{"src", s.Src}, {"dst", s.Dst}} {
		if f.p.IsValid() && f.p.Masked() != f.p {
			report(prefix+f.name, fmt.Sprintf("%s has host bits set; did you mean %s?", f.p, f.p.Masked()))
		}
	}
	if s.Src.IsValid() && s.Dst.IsValid() && s.Src.Addr().Is4() != s.Dst.Addr().Is4() {
		report(prefix+"dst", fmt.Sprintf("%s is %s but src %s is %s", s.Dst, family(s.Dst.Addr()), s.Src, family(s.Src.Addr())))
	}
}

func family(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

// KeyID identifies one secret key by a SHA-256 digest of its bytes, so
// that the key-reuse checks remember keys without holding them.
type KeyID [sha256.Size]byte

// KeyUse is one secret key of a state: the field that holds it, named as
// in the config file (aead.key, enc.key, auth.key), and its KeyID.
//
// Each secret key may serve one SA only, whatever the directions and
// algorithms. A second SA with an SA's key starts its sequence numbers at
// 1 again, and AES-GCM and ChaCha20-Poly1305 take their nonces from them
// (RFC 4106 §3.1: never repeated under one key). That holds across
// directions too: with one key for an outbound and an inbound SA, both
// peers seal sequence 1, 2, ... under it. So the config file, the daemon
// and the sidecar refuse a key that another SA has or had (KeyOwners).
type KeyUse struct {
	Field string
	ID    KeyID
}

// KeyUses returns the secret keys of c, one per algorithm that has a key.
// The 4-byte salt of an AEAD's key material is left out: the same cipher
// key under another salt is the same key. The digest leaves out the
// algorithm, so that one key in two algorithms (an AES key for
// rfc4106(gcm(aes)) and for cbc(aes)) is one key too.
func KeyUses(c *sa.Config) []KeyUse {
	var uses []KeyUse
	for _, alg := range []struct {
		field string
		a     *sa.Algorithm
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

// KeyOwner is the SA that holds or held a key, described for error
// messages ("states[0]", "spi 0x00001001 dir out dst 192.0.2.2"), and the
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

// KeyOwners remembers which SA holds or held each key, by KeyID. It holds
// no key. A nil KeyOwners finds nothing; Add needs a non-nil one. It is
// not safe for concurrent use.
type KeyOwners map[KeyID]KeyOwner

// Conflict returns the first key of c that o holds, or that an earlier
// field of c holds too (then owner.SA is empty): the field of c that
// holds it and its other owner. found is false when c's keys are all
// its own.
func (o KeyOwners) Conflict(c *sa.Config) (field string, owner KeyOwner, found bool) {
	uses := KeyUses(c)
	for i, u := range uses {
		if owner, ok := o[u.ID]; ok {
			return u.Field, owner, true
		}
		for _, prev := range uses[:i] {
			if prev.ID == u.ID {
				return u.Field, KeyOwner{Field: prev.Field}, true
			}
		}
	}
	return "", KeyOwner{}, false
}

// Add records every key of c as owned by the SA that owner describes; a
// key already recorded keeps its first owner.
func (o KeyOwners) Add(c *sa.Config, owner string) {
	for _, u := range KeyUses(c) {
		if _, ok := o[u.ID]; !ok {
			o[u.ID] = KeyOwner{SA: owner, Field: u.Field}
		}
	}
}
