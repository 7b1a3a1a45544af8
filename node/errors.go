package node

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/ipsecd/ipsecd/sa"
)

// Errors of the Node's changes, to be matched with errors.Is; the
// message around them names the SA and the field.
var (
	// ErrInvalid: the request cannot be installed as it is (no
	// interface with its if_id, no raw ESP socket for an SA without
	// encap, an SA sa.New refuses). Fix the named field.
	ErrInvalid = errors.New("invalid")
	// ErrKeyUsed: a key of the new SA was used by an earlier SA of this
	// node, of either direction, running or removed. Make a new key.
	ErrKeyUsed = errors.New("key material already used by an earlier SA")
	// ErrNoRawESP: an SA without encap (raw ESP, IP protocol 50) on a
	// Node whose underlay has no raw ESP socket. Add encap, or open the
	// underlay with RawESP.
	ErrNoRawESP = errors.New("missing, and the underlay has no raw ESP socket")
	// ErrOwned: the SA or policy belongs to another owner, which alone
	// may change it.
	ErrOwned = errors.New("owned by another")
)

// KeyUsedError refuses a new SA (State) whose key (in Field, named as
// the config file names it) an earlier SA of this node had (Prev). It
// matches ErrKeyUsed and ErrInvalid; front ends word it their way.
type KeyUsedError struct {
	State StateID
	Field string
	Prev  sa.KeyOwner
}

func (e *KeyUsedError) Error() string {
	return fmt.Sprintf("%s: %s: %v (%s); a second SA with it, of either direction, would start its sequence "+
		"numbers again at 1, which AES-GCM and ChaCha20-Poly1305 take as nonces (an inbound SA would accept the old packets again)",
		ErrInvalid, e.Field, ErrKeyUsed, e.Prev)
}

func (e *KeyUsedError) Is(target error) bool { return target == ErrKeyUsed || target == ErrInvalid }

// StateID names an SA as `ip xfrm state` does: direction, SPI and outer
// destination (an invalid Dst matches any, for inbound SAs).
type StateID struct {
	Dir sa.Dir
	SPI uint32
	Dst netip.Addr
}

// String names the SA as every message of the daemon does:
// "spi 0x1001 dir out dst 192.0.2.2" (dir left out when 0, as a control
// request may leave it).
func (id StateID) String() string {
	if id.Dir == 0 {
		return fmt.Sprintf("spi %#x dst %s", id.SPI, id.Dst)
	}
	return fmt.Sprintf("spi %#x dir %s dst %s", id.SPI, id.Dir, id.Dst)
}

// IDOf returns the name of SA s.
func IDOf(s *sa.SA) StateID { return StateID{s.Dir(), s.SPI(), s.Dst()} }

// FieldError is one refused state of BuildStates: Index is its place in
// the list, Field the field at fault, named as the config file names it
// ("aead.key", "encap"; empty for the state as a whole). Msg never holds
// key material.
type FieldError struct {
	Index int
	Field string
	Msg   string
	Err   error // what Msg says, when it came from another package (sa.New, seqstate); may be nil
}

func (e *FieldError) Unwrap() error { return e.Err }

func (e *FieldError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("state %d: %s", e.Index, e.Msg)
	}
	return fmt.Sprintf("state %d: %s: %s", e.Index, e.Field, e.Msg)
}

// FieldErrors are the refused states of one BuildStates call.
type FieldErrors []*FieldError

// Unwrap gives errors.Is and errors.As the refused states.
func (l FieldErrors) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

func (l FieldErrors) Error() string {
	msgs := make([]string, len(l))
	for i, e := range l {
		msgs[i] = e.Error()
	}
	return fmt.Sprint(msgs)
}
