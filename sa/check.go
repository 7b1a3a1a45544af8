package sa

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/ipsecd/ipsecd/internal/hint"
	"github.com/ipsecd/ipsecd/internal/keytext"
	"github.com/ipsecd/ipsecd/sa/replay"
)

// The rules of an SA and a policy are written here once. The config file,
// the control socket and the command line map their syntax to a Config or
// Policy and call Check or CheckPolicy; New and the SAD apply the same
// rules. Fields are named as the config file names them (spi, aead.key,
// lifetime.soft_bytes, selector.dst), so that a front end prefixes them
// with where the SA came from (FILE:LINE: states[N].) and a bad value
// reads the same whichever way it came.

// Limits of an SA's values.
const (
	MinSPI = 0x100 // SPIs 1..255 are reserved (RFC 4303 §2.1)
	// MaxReplayWindow is the largest replay window, in packets.
	MaxReplayWindow = replay.MaxSize
	// DefaultReplayWindow is the window of an inbound SA whose front end
	// names none (DefaultReplayWindowFor): RFC 4303 §3.4.3 prefers 64.
	DefaultReplayWindow = 64
	// MaxAddSeconds is the longest add-time lifetime, in seconds, that a
	// Lifetime (a time.Duration) holds.
	MaxAddSeconds = uint64(math.MaxInt64 / time.Second)
)

// DefaultReplayWindowFor returns the replay window of an SA of direction
// dir whose front end names none: DefaultReplayWindow inbound, 0 outbound
// (an outbound SA checks no window). The config file, the control socket
// and the command line all take it from here, so that a state reads the
// same whichever way it came; a window named 0 stays 0 (anti-replay off).
func DefaultReplayWindowFor(dir Dir) uint32 {
	if dir == DirIn {
		return DefaultReplayWindow
	}
	return 0
}

// FieldError is a refused Config or Policy field. Field is named as in the
// config file ("aead.key", "spi", "lifetime.soft_bytes"); Msg never holds
// key material.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Is makes errors.Is(err, ErrInvalidConfig) true.
func (e *FieldError) Is(target error) bool { return target == ErrInvalidConfig }

// FieldErrors are every refused field of one Config or Policy, in the
// order of the config file's fields. errors.As finds the first
// *FieldError in it, errors.Is ErrInvalidConfig.
type FieldErrors []*FieldError

// Error returns the errors one per line.
func (l FieldErrors) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap gives errors.Is and errors.As each refused field.
func (l FieldErrors) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

func (l *FieldErrors) add(field, format string, args ...any) {
	*l = append(*l, &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)})
}

// err returns l as an error, nil when it is empty.
func (l FieldErrors) err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

// Check checks c by every rule of an SA to install: those of New, and an
// if_id that names an interface (not 0). It returns nil or FieldErrors.
// What needs more than c (the interface exists, no other SA has the SPI
// or the keys) is the installer's to check.
func Check(c *Config) error {
	return check(c, true).err()
}

// CheckPolicy is Check for a policy: the SAD's rules and a non-zero if_id.
func CheckPolicy(p *Policy) error {
	return checkPolicy(p, true).err()
}

// check applies the rules of an SA. New leaves out the if_id (needIfID
// false): an SA of a SAD without interfaces, as in tests and benchmarks,
// has none.
func check(c *Config, needIfID bool) FieldErrors {
	var errs FieldErrors
	switch {
	case !c.Src.IsValid():
		errs.add("src", "missing")
	case !c.Dst.IsValid():
		errs.add("dst", "missing")
	case c.Src.Is4() != c.Dst.Is4():
		errs.add("dst", "%s is %s but src %s is %s", c.Dst, family(c.Dst), c.Src, family(c.Src))
	}
	if c.SPI < MinSPI {
		errs.add("spi", "%#x is reserved; want 0x100..0xffffffff", c.SPI)
	}
	if c.Dir != DirIn && c.Dir != DirOut {
		errs.add("dir", "missing; want in or out")
	}
	if c.Mode != ModeTunnel && c.Mode != ModeTransport {
		errs.add("mode", "missing; want tunnel or transport")
	}
	if needIfID && c.IfID == 0 {
		errs.add("if_id", "missing or 0; want the if_id of an interface")
	}
	checkSuite(c, &errs)
	if c.Encap != nil {
		if c.Encap.SrcPort == 0 {
			errs.add("encap.sport", "must not be 0")
		}
		if c.Encap.DstPort == 0 {
			errs.add("encap.dport", "must not be 0")
		}
	}
	if c.ReplayWindow > MaxReplayWindow {
		errs.add("replay_window", "%d is too large; want 0..%d", c.ReplayWindow, MaxReplayWindow)
	}
	checkLifetime(c.Lifetime, &errs)
	checkSelector(c.Selector, "selector.", &errs)
	return errs
}

// checkLifetime checks the limits of a state: Check's and SetLifetime's
// (state update) rules.
func checkLifetime(lt Lifetime, errs *FieldErrors) {
	if lt.SoftBytes != 0 && lt.HardBytes != 0 && lt.SoftBytes > lt.HardBytes {
		errs.add("lifetime.soft_bytes", "is larger than hard_bytes")
	}
	if lt.SoftPackets != 0 && lt.HardPackets != 0 && lt.SoftPackets > lt.HardPackets {
		errs.add("lifetime.soft_packets", "is larger than hard_packets")
	}
	if lt.SoftAdd < 0 || lt.HardAdd < 0 {
		errs.add("lifetime", "negative duration")
	}
	if lt.SoftAdd != 0 && lt.HardAdd != 0 && lt.SoftAdd > lt.HardAdd {
		errs.add("lifetime.soft_add_seconds", "is larger than hard_add_seconds")
	}
}

// checkSuite checks the algorithms and their keys. Messages name the
// algorithm and the key's length, never its bytes.
func checkSuite(c *Config, errs *FieldErrors) {
	switch {
	case c.AEAD != nil && (c.Enc != nil || c.Auth != nil):
		errs.add("aead", "set together with enc or auth; use aead alone, or enc with auth")
		return
	case c.AEAD == nil && c.Enc == nil && c.Auth == nil:
		errs.add("aead", "missing; give aead, or enc with auth")
		return
	case c.AEAD == nil && c.Enc == nil:
		errs.add("enc", "missing; auth needs enc (ecb(cipher_null) for integrity only)")
	case c.AEAD == nil && c.Auth == nil:
		errs.add("auth", "missing; ESP without integrity is not supported (RFC 8221), add auth hmac(sha256)")
	}
	for _, a := range []struct {
		alg  *Algorithm
		kind AlgorithmKind
	}{{c.AEAD, KindAEAD}, {c.Enc, KindEnc}, {c.Auth, KindAuth}} {
		if a.alg != nil {
			checkAlgorithm(a.alg, a.kind, errs)
		}
	}
	// One key for encryption and integrity (a 32-byte cbc(aes) key as
	// the hmac(sha256) key) is a key with two uses.
	if field, other, found := SharedKey(KeyUses(c)); found {
		errs.add(field, "the same key as %s: each algorithm needs a key of its own (make one with ipsecd genkey)", other)
	}
}

func checkAlgorithm(a *Algorithm, kind AlgorithmKind, errs *FieldErrors) {
	prefix := string(kind) + "."
	names := algorithmNames(kind)
	info, ok := LookupAlgorithm(a.Name)
	switch {
	case a.Name == "":
		errs.add(prefix+"name", "missing; want %s", hint.OrList(names))
		return
	case !ok:
		// The name is not shown: it may be a key pasted into the wrong
		// field.
		msg := "unknown algorithm; want " + hint.OrList(names)
		switch {
		case keytext.LooksLikeKey(a.Name):
			msg = "unknown algorithm: the value looks like key material (not shown), which goes in key or key_file; want " + hint.OrList(names)
		case hint.Closest(a.Name, names) != "":
			msg = "unknown algorithm; did you mean " + hint.Closest(a.Name, names) + "?"
		}
		errs.add(prefix+"name", "%s", msg)
		return
	case info.Kind != kind:
		errs.add(prefix+"name", "%s is not an %s algorithm; want %s", a.Name, kind, hint.OrList(names))
		return
	}
	switch {
	case len(info.KeyBytes) == 0 && len(a.Key) != 0:
		errs.add(prefix+"key", "%s takes no key, got %d bytes", a.Name, len(a.Key))
	case len(info.KeyBytes) != 0 && len(a.Key) == 0:
		errs.add(prefix+"key", "missing; %s wants %s bytes", a.Name, hint.OrList(info.KeyBytes))
	case len(info.KeyBytes) != 0 && !slices.Contains(info.KeyBytes, len(a.Key)):
		errs.add(prefix+"key", "%s wants %s bytes, got %d", a.Name, hint.OrList(info.KeyBytes), len(a.Key))
	}
	field := kind.BitsField()
	if field == "" {
		field = "icv_bits" // what a front end without the config's shape may set for enc
	}
	switch {
	case len(info.Bits) == 0 && a.Bits != 0:
		errs.add(prefix+field, "%s has no %s", a.Name, field)
	case len(info.Bits) != 0 && a.Bits != 0 && !slices.Contains(info.Bits, a.Bits):
		errs.add(prefix+field, "%s allows %s, got %d", a.Name, hint.OrList(info.Bits), a.Bits)
	}
}

// checkPolicy applies the rules of a policy; the SAD's own leave out the
// if_id, as check does for New.
func checkPolicy(p *Policy, needIfID bool) FieldErrors {
	var errs FieldErrors
	if p.Dir != DirIn && p.Dir != DirOut {
		errs.add("dir", "missing; want in or out")
	}
	if needIfID && p.IfID == 0 {
		errs.add("if_id", "missing or 0; want the if_id of an interface")
	}
	if p.Action != ActionAllow && p.Action != ActionBlock {
		errs.add("action", "want allow or block")
	}
	checkSelector(p.Selector, "", &errs)
	if p.Selector.TS != nil {
		errs.add("selector", "a policy takes src and dst prefixes, not traffic selector lists")
	}
	return errs
}

func checkSelector(s Selector, prefix string, errs *FieldErrors) {
	for _, f := range []struct {
		name string
		p    netip.Prefix
	}{{"src", s.Src}, {"dst", s.Dst}} {
		if f.p.IsValid() && f.p.Masked() != f.p {
			errs.add(prefix+f.name, "%s has host bits set; did you mean %s?", f.p, f.p.Masked())
		}
	}
	if s.Src.IsValid() && s.Dst.IsValid() && s.Src.Addr().Is4() != s.Dst.Addr().Is4() {
		errs.add(prefix+"dst", "%s is %s but src %s is %s", s.Dst, family(s.Dst.Addr()), s.Src, family(s.Src.Addr()))
	}
	if s.TS != nil {
		if s.Src.IsValid() || s.Dst.IsValid() {
			errs.add(prefix+"src", "set beside traffic selector lists (src_ts, dst_ts); give one or the other")
		}
		checkTSList(s.TS.Src, prefix+"src_ts", errs)
		checkTSList(s.TS.Dst, prefix+"dst_ts", errs)
	}
}

func family(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

// LifetimeSeconds is a Lifetime as the config file, the control socket
// and the command line write it: add times in whole seconds.
type LifetimeSeconds struct {
	SoftBytes, HardBytes           uint64
	SoftPackets, HardPackets       uint64
	SoftAddSeconds, HardAddSeconds uint64
}

// Lifetime converts l, refusing an add time over MaxAddSeconds (a
// FieldErrors naming lifetime.soft_add_seconds or hard_add_seconds).
func (l LifetimeSeconds) Lifetime() (Lifetime, error) {
	var errs FieldErrors
	for _, f := range []struct {
		name string
		secs uint64
	}{{"soft_add_seconds", l.SoftAddSeconds}, {"hard_add_seconds", l.HardAddSeconds}} {
		if f.secs > MaxAddSeconds {
			errs.add("lifetime."+f.name, "%d is too large; want 0..%d", f.secs, MaxAddSeconds)
		}
	}
	if errs != nil {
		return Lifetime{}, errs
	}
	return Lifetime{SoftBytes: l.SoftBytes, HardBytes: l.HardBytes, SoftPackets: l.SoftPackets, HardPackets: l.HardPackets,
		SoftAdd: time.Duration(l.SoftAddSeconds) * time.Second, HardAdd: time.Duration(l.HardAddSeconds) * time.Second}, nil
}

// Seconds is l as LifetimeSeconds; parts of a second are dropped.
func (l Lifetime) Seconds() LifetimeSeconds {
	return LifetimeSeconds{SoftBytes: l.SoftBytes, HardBytes: l.HardBytes, SoftPackets: l.SoftPackets, HardPackets: l.HardPackets,
		SoftAddSeconds: uint64(max(l.SoftAdd, 0) / time.Second), HardAddSeconds: uint64(max(l.HardAdd, 0) / time.Second)}
}
