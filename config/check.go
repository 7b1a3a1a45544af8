package config

import (
	"strings"

	"github.com/ipsecd/ipsecd/sa"
)

// The rules of one state or policy are sa's (sa.Check, sa.CheckPolicy);
// what is checked here is about the file: if_ids that name its
// interfaces, states and policies given twice, and a key that two states
// share (KeyOwners).

// Limits of a state, as sa has them (the IKE sections take them too).
const (
	MaxReplayWindow     = sa.MaxReplayWindow
	DefaultReplayWindow = sa.DefaultReplayWindow
)

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

// KeyOwners remembers which SA holds or held each key, by sa.KeyID: each
// key may serve one SA only (sa.KeyUse says why). It holds no key. A nil
// KeyOwners finds nothing; Add needs a non-nil one. It is not safe for
// concurrent use.
type KeyOwners map[sa.KeyID]KeyOwner

// Conflict returns the first key of c that o holds, or that an earlier
// field of c holds too (then owner.SA is empty): the field of c that
// holds it and its other owner. found is false when c's keys are all
// its own.
func (o KeyOwners) Conflict(c *sa.Config) (field string, owner KeyOwner, found bool) {
	uses := sa.KeyUses(c)
	for _, u := range uses {
		if owner, ok := o[u.ID]; ok {
			return u.Field, owner, true
		}
	}
	if field, earlier, found := sa.SharedKey(uses); found {
		return field, KeyOwner{Field: earlier}, true
	}
	return "", KeyOwner{}, false
}

// Add records every key of c as owned by the SA that owner describes; a
// key already recorded keeps its first owner.
func (o KeyOwners) Add(c *sa.Config, owner string) {
	for _, u := range sa.KeyUses(c) {
		if _, ok := o[u.ID]; !ok {
			o[u.ID] = KeyOwner{SA: owner, Field: u.Field}
		}
	}
}
