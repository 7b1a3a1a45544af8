package node

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"

	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/seqstate"
)

// MakeSA makes an SA that shares the node's counters, resumed from its
// key's record in the state directory (an outbound SA continues above its
// last reservation, an inbound one refuses the previous run's packets).
// Without a state directory, AES-GCM and ChaCha20-Poly1305 are refused
// (seqstate.Without) unless the Node's keys are ephemeral. The caller owns
// the SA until it joins the SAD: one that does not join must be
// Discarded, so that its copies of the keys are zeroed. MakeSA does not
// check key reuse: BuildStates, AddState and InstallChild do. AddState
// and InstallChild make the SAs of an owner with FreshKeys without a
// record.
func (n *Node) MakeSA(c sa.Config) (*sa.SA, error) { return n.makeSA(c, false) }

// makeSA is MakeSA; with fresh (Owner.FreshKeys), the SA has no sequence
// record and needs no state directory.
func (n *Node) makeSA(c sa.Config, fresh bool) (*sa.SA, error) {
	if fresh {
		return n.newSA(c, n.counters)
	}
	if n.seq == nil && n.seqErr != nil {
		if err := seqstate.Without(&c, n.stateDir, n.seqErr); err != nil {
			return nil, err
		}
	}
	s, err := n.newSA(c, n.counters)
	if err != nil || n.seq == nil {
		return s, err
	}
	if err := n.seq.Attach(s); err != nil {
		s.Discard()
		return nil, err
	}
	return s, nil
}

// BuildStates makes owner's SAs from configs, the whole of what owner is
// to hold (a config file on start or reload). A running SA that configs
// names again (same direction, SPI and destination) with the same config,
// keys included, is kept as it is (one of another owner passes to owner), so that a reload does not
// reset its sequence number, replay window or counters. One that configs
// names with another config is refused (see changedState), and so is a
// new SA with a key that any SA of this node, of either direction, had
// before: it would start its sequence numbers again at 1, and the AEADs
// take their nonces from them (RFC 4106 §3.1: never repeated under one
// key); an inbound one would accept the old SA's packets again.
//
// The SAs come back oldest first: the kept ones in the order they were
// added, then the new ones in list order. The SAD seals with the newest of
// the outbound SAs that cover a packet, so an outbound SA that a reload
// adds takes over from a running one wherever the file lists it
// (make-before-break), and a reload that adds nothing changes no choice.
//
// On error (FieldErrors) it returns no SAs, and those it made are
// Discarded (their keys zeroed); the running ones are left as they are.
// On success the result goes to Sync, or to Discard.
func (n *Node) BuildStates(owner Owner, configs []sa.Config) (*Build, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	b := &Build{owner: owner}
	keep := map[StateID]*sa.SA{}
	for _, s := range n.sad.States() {
		keep[IDOf(s)] = s
	}
	b.old = n.ownedLocked(owner)
	var errs FieldErrors
	batch := sa.KeyOwners{} // the keys of configs so far
	fail := func(i int, field, msg string) { errs = append(errs, &FieldError{Index: i, Field: field, Msg: msg}) }
	for i, c := range configs {
		id := StateID{c.Dir, c.SPI, c.Dst}
		if s := keep[id]; s != nil {
			run := s.Config()
			field, msg := changedState(run, c)
			run.ClearKeys()
			if field != "" {
				fail(i, field, msg)
				continue
			}
			if run.Lifetime != c.Lifetime {
				b.lifetimes = append(b.lifetimes, lifetimeChange{s, c.Lifetime})
			}
			if n.owners[s] != owner {
				// Another owner's SA, named as it runs: it passes
				// to this owner.
				b.adopted = append(b.adopted, s)
			}
			b.States = append(b.States, s)
			continue
		}
		if c.Encap == nil && !n.rawESP {
			// The file may turn raw_esp on, but the running underlay
			// keeps the sockets it opened at start.
			fail(i, "encap", "missing, and the running underlay has no raw ESP socket (underlay.raw_esp was off at start, and underlay "+
				"changes take effect on restart): the SA's traffic would be dropped; add encap: {type: espinudp}, or restart")
			continue
		}
		if f, prev, used := batch.Conflict(&c); used {
			fail(i, f, fmt.Sprintf("the same key as %s: each SA needs keys of its own, in either direction", prev))
			continue
		}
		batch.Add(&c, fmt.Sprintf("states[%d]", i))
		if f, prev, used := n.keys.Conflict(&c); used {
			fail(i, f, fmt.Sprintf("SA %s: this key was already used by an earlier SA (%s), and a second SA with it, of either direction, "+
				"would start its sequence numbers again at 1, which AES-GCM and ChaCha20-Poly1305 take as nonces "+
				"(an inbound SA would accept the old packets again): give the new SA a new key", id, prev))
			continue
		}
		s, err := n.makeSA(c, owner.FreshKeys())
		if err != nil {
			errs = append(errs, &FieldError{Index: i, Msg: err.Error(), Err: err})
			continue
		}
		b.States = append(b.States, s)
	}
	if len(errs) != 0 {
		b.Discard()
		return nil, errs
	}
	// Stable: SAs made in this call may share a clock reading.
	slices.SortStableFunc(b.States, func(a, b *sa.SA) int { return a.Added().Compare(b.Added()) })
	return b, nil
}

// Build is what BuildStates made for one owner: the SAs to hold, old and
// new. Hand it to Sync, or Discard it.
type Build struct {
	owner   Owner
	States  []*sa.SA
	old     []*sa.SA // owner's SAs when BuildStates ran
	adopted []*sa.SA // other owners' SAs that States names as they run
	// lifetimes are the new limits of running SAs that States keeps,
	// applied in place by Sync.
	lifetimes []lifetimeChange
}

// lifetimeChange is a kept SA's new limits.
type lifetimeChange struct {
	sa       *sa.SA
	lifetime sa.Lifetime
}

// Discard zeroes the keys of the SAs b made (not the running ones it
// keeps). It is idempotent, and what Sync does when it fails.
func (b *Build) Discard() {
	running := make(map[*sa.SA]bool, len(b.old))
	for _, s := range append(slices.Clone(b.old), b.adopted...) {
		running[s] = true
	}
	for _, s := range b.States {
		if !running[s] {
			s.Discard()
		}
	}
}

// Change counts what a Sync changed for its owner.
type Change struct {
	StatesAdded, StatesRemoved, StatesKept       int
	PoliciesAdded, PoliciesRemoved, PoliciesKept int
	// StatesTaken and PoliciesTaken are SAs and policies another owner
	// had added that the synced owner now names as they run: they pass
	// to it.
	StatesTaken, PoliciesTaken int
	// StatesUpdated are kept SAs whose limits changed in place.
	StatesUpdated int
}

// Sync makes b's SAs and policies everything b's owner holds, in one
// table change: the owner's SAs and policies absent from them are
// removed, those of other owners stay. New SAs go in before old ones go
// (make-before-break happens in one table swap). On error nothing changes
// and b is Discarded; on success its keys are remembered.
func (n *Node) Sync(b *Build, policies []sa.Policy) (Change, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	defer n.notifyLocked(n.snapshotLocked(), "reload")
	var ch Change
	mine := make(map[*sa.SA]bool, len(b.States))
	for _, s := range b.States {
		mine[s] = true
	}
	for _, s := range b.old {
		if mine[s] {
			ch.StatesKept++
		} else {
			ch.StatesRemoved++
		}
	}
	ch.StatesAdded = len(b.States) - ch.StatesKept - len(b.adopted)
	ch.StatesTaken = len(b.adopted)
	if slices.ContainsFunc(b.old, func(s *sa.SA) bool { return n.owners[s] != b.owner }) ||
		slices.ContainsFunc(b.adopted, func(s *sa.SA) bool { _, ok := n.owners[s]; return !ok }) {
		// An SA of the build left the owner (removed, expired or
		// deleted) since BuildStates: build again.
		b.Discard()
		return Change{}, fmt.Errorf("the SAs changed while the new ones were made: try again")
	}
	var states []*sa.SA
	for _, s := range n.sad.States() {
		if o, ok := n.owners[s]; (!ok || o != b.owner) && !slices.Contains(b.adopted, s) {
			states = append(states, s)
		}
	}
	states = append(states, b.States...)
	named := make(map[policyID]bool, len(policies))
	for _, p := range policies {
		named[idOf(p)] = true
	}
	var pols []sa.Policy
	for _, p := range n.sad.Policies() {
		o := n.policyOwners[idOf(p)]
		switch {
		case o == b.owner && named[idOf(p)]:
			ch.PoliciesKept++
		case o == b.owner:
			ch.PoliciesRemoved++
		case named[idOf(p)]:
			ch.PoliciesTaken++ // the owner's version replaces it
		default:
			pols = append(pols, p)
		}
	}
	ch.PoliciesAdded = len(policies) - ch.PoliciesKept - ch.PoliciesTaken
	pols = append(pols, policies...)
	if err := n.sad.Replace(states, pols); err != nil {
		b.Discard()
		return Change{}, err
	}
	for _, lc := range b.lifetimes {
		// The file's lifetimes passed config.CheckState, which refuses
		// what SetLifetime refuses; should one slip through, the SA
		// keeps its limits and the log says so.
		if err := lc.sa.SetLifetime(lc.lifetime); err != nil {
			n.log.WithError(err).Warnf("SA %s: lifetime not changed", IDOf(lc.sa))
			continue
		}
		ch.StatesUpdated++
		if n.events != nil {
			n.events(Event{Kind: EventStateUpdated, SA: lc.sa})
		}
	}
	for _, s := range b.old {
		n.forgetLocked(s)
	}
	for _, s := range b.States {
		n.owners[s] = b.owner
	}
	n.rememberKeysLocked(b.owner, b.States...)
	for id, o := range n.policyOwners {
		if o == b.owner && !named[id] {
			delete(n.policyOwners, id)
		}
	}
	for _, p := range policies {
		n.policyOwners[idOf(p)] = b.owner
	}
	return ch, nil
}

// ownedLocked returns the running SAs of owner, oldest first.
func (n *Node) ownedLocked(owner Owner) []*sa.SA {
	var out []*sa.SA
	for _, s := range n.sad.States() {
		if o, ok := n.owners[s]; ok && o == owner {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b *sa.SA) int { return a.Added().Compare(b.Added()) })
	return out
}

// OwnerOf returns the owner of the running SA s; ok is false for an SA
// the Node does not hold.
func (n *Node) OwnerOf(s *sa.SA) (o Owner, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	o, ok = n.owners[s]
	return o, ok
}

// PolicyOwner returns the owner of the policy with p's direction, if_id
// and selector.
func (n *Node) PolicyOwner(p sa.Policy) (o Owner, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	o, ok = n.policyOwners[idOf(p)]
	return o, ok
}

// rememberKeysLocked records the keys of states, just installed under
// owner: for good, or, for an owner with FreshKeys, while the SA runs
// (forgetLocked). Such keys are new for their SA and never given again,
// and a memory of each child's keys would grow with every rekey; while
// it runs, its keys are still refused to another SA.
func (n *Node) rememberKeysLocked(owner Owner, states ...*sa.SA) {
	for _, s := range states {
		c := s.Config()
		n.keys.Add(&c, IDOf(s).String())
		if owner.FreshKeys() {
			var ids []sa.KeyID
			for _, u := range sa.KeyUses(&c) {
				ids = append(ids, u.ID)
			}
			n.freshKeys[s] = ids
		}
		c.ClearKeys()
	}
}

// forgetLocked forgets s, which left the SAD: its owner, and its keys if
// they were fresh.
func (n *Node) forgetLocked(s *sa.SA) {
	delete(n.owners, s)
	for _, id := range n.freshKeys[s] {
		delete(n.keys, id)
	}
	delete(n.freshKeys, s)
}

// changedState compares a running SA's config with the new config of
// the same direction, SPI and destination. It returns "" when they are
// the same SA, else the first field that differs (named as in the
// config file) and why it is refused. A running SA is never replaced in
// place: a new SA under its SPI would start again at sequence number 1,
// which the peer's replay window drops (outbound), or forget the packets
// it has seen and let replays in (inbound); and a new key under a
// running SPI makes the peer drop what is in flight, as no one can tell
// which key sealed a packet. The message never holds key material.
func changedState(run, file sa.Config) (field, msg string) {
	// Limits change in place (sa.SA.SetLifetime): BuildStates applies
	// them to the running SA.
	file.Lifetime = run.Lifetime
	name := "SA " + StateID{run.Dir, run.SPI, run.Dst}.String()
	for _, alg := range []struct {
		field, bits string
		run, file   *sa.Algorithm
	}{{"aead", "icv_bits", run.AEAD, file.AEAD}, {"enc", "", run.Enc, file.Enc}, {"auth", "trunc_bits", run.Auth, file.Auth}} {
		switch {
		case (alg.run == nil) != (alg.file == nil):
			field = alg.field
		case alg.run == nil:
			continue
		case alg.run.Name != alg.file.Name:
			field = alg.field + ".name"
		case alg.run.Bits != alg.file.Bits:
			field = alg.field + "." + alg.bits
		case !bytes.Equal(alg.run.Key, alg.file.Key):
			return alg.field + ".key", name + " is running with another key, and a running SA is not rekeyed in place " +
				"(the peer would drop the packets in flight, and the sequence number would start again at 1): " +
				"put the new key under a new SPI, and remove this state once the peer uses the new one (make-before-break)"
		default:
			continue
		}
		return field, name + " is running with another algorithm, and a running SA does not change in place: " +
			"put the new algorithm under a new SPI, and remove this state once the peer uses the new one (make-before-break)"
	}
	switch {
	case run.Src != file.Src:
		field = "src"
	case run.Mode != file.Mode:
		field = "mode"
	case run.IfID != file.IfID:
		field = "if_id"
	case !reflect.DeepEqual(run.Encap, file.Encap):
		field = "encap"
	case run.ReplayWindow != file.ReplayWindow:
		field = "replay_window"
	case run.ESN != file.ESN:
		field = "esn"
	case !reflect.DeepEqual(run.Selector, file.Selector):
		field = "selector"
	case !reflect.DeepEqual(run, file):
		field = "" // a field this function does not know: name the state
	default:
		return "", ""
	}
	what := "another " + field
	if field == "" {
		what = "another config"
	}
	msg = name + " is running with " + what + ", and a running SA does not change in place " +
		"(a new SA would start its sequence number and replay window again): put the change under a new SPI, " +
		"and remove this state once the peer uses the new one (make-before-break)"
	if field == "" {
		field = "spi"
	}
	return field, msg
}
