package node

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/seqstate"
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
	Prev  config.KeyOwner
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

func (id StateID) String() string {
	return fmt.Sprintf("spi 0x%08x dir %s dst %s", id.SPI, id.Dir, id.Dst)
}

func idOfSA(s *sa.SA) StateID { return StateID{s.Dir(), s.SPI(), s.Dst()} }

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

// MakeSA makes an SA that shares the node's counters, resumed from its
// key's record in the state directory (an outbound SA continues above its
// last reservation, an inbound one refuses the previous run's packets).
// Without a state directory, AES-GCM and ChaCha20-Poly1305 are refused
// (seqstate.Without) unless the Node's keys are ephemeral. The caller owns
// the SA until it joins the SAD: one that does not join must be
// Discarded, so that its copies of the keys are zeroed. MakeSA does not
// check key reuse: BuildStates, AddState and InstallChild do.
func (n *Node) MakeSA(c sa.Config) (*sa.SA, error) {
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
		keep[idOfSA(s)] = s
	}
	b.old = n.ownedLocked(owner)
	var errs FieldErrors
	batch := config.KeyOwners{} // the keys of configs so far
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
		s, err := n.MakeSA(c)
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
}

// Sync makes b's SAs and policies everything b's owner holds, in one
// table change: the owner's SAs and policies absent from them are
// removed, those of other owners stay. New SAs go in before old ones go
// (make-before-break happens in one table swap). On error nothing changes
// and b is Discarded; on success its keys are remembered.
func (n *Node) Sync(b *Build, policies []sa.Policy) (Change, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
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
	for _, s := range b.old {
		delete(n.owners, s)
	}
	for _, s := range b.States {
		n.owners[s] = b.owner
	}
	n.rememberKeysLocked(b.States...)
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

// rememberKeysLocked records the keys of states, just installed.
func (n *Node) rememberKeysLocked(states ...*sa.SA) {
	for _, s := range states {
		c := s.Config()
		n.keys.Add(&c, idOfSA(s).String())
		c.ClearKeys()
	}
}

// checkNewLocked checks a config for a new SA of AddState or
// InstallChild: an interface to deliver to, a socket to send on, keys of
// its own.
func (n *Node) checkNewLocked(c *sa.Config) error {
	if n.reg.Lookup(c.IfID) == nil {
		return fmt.Errorf("%w: if_id: no interface has if_id %d", ErrInvalid, c.IfID)
	}
	if c.Encap == nil && !n.rawESP {
		return fmt.Errorf("%w: encap: %w: without encap the SA is raw ESP (IP protocol 50) and its traffic would be dropped",
			ErrInvalid, ErrNoRawESP)
	}
	if f, prev, used := n.keys.Conflict(c); used {
		if n.runningLocked(StateID{c.Dir, c.SPI, c.Dst}) {
			// The SA itself is still there: that is the first thing
			// wrong with the request.
			return fmt.Errorf("state %s: %w", StateID{c.Dir, c.SPI, c.Dst}, sa.ErrExists)
		}
		return &KeyUsedError{State: StateID{c.Dir, c.SPI, c.Dst}, Field: f, Prev: prev}
	}
	return nil
}

// runningLocked reports whether the SAD holds an SA with id exactly.
func (n *Node) runningLocked(id StateID) bool {
	return slices.ContainsFunc(n.sad.States(), func(s *sa.SA) bool { return idOfSA(s) == id })
}

// AddState makes an SA from c and adds it under owner (`ipsecd state
// add`). It is refused when no interface has c's if_id, when c has no
// encap and the underlay no raw ESP socket, and when a key of c was used
// by any SA of this node, running or removed (ErrKeyUsed). c's key bytes
// are zeroed before AddState returns (the SA keeps a copy of its own).
func (n *Node) AddState(owner Owner, c sa.Config) error {
	defer c.ClearKeys()
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.checkNewLocked(&c); err != nil {
		return err
	}
	s, err := n.MakeSA(c)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := n.sad.Add(s); err != nil {
		s.Discard()
		return err
	}
	n.owners[s] = owner
	n.rememberKeysLocked(s)
	return nil
}

// DeleteState removes the SA id names, whoever owns it, as `ip xfrm
// state delete` does; sa.ErrNotFound when there is none.
func (n *Node) DeleteState(id StateID) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var victim *sa.SA
	for _, s := range n.sad.States() {
		if s.Dir() == id.Dir && s.SPI() == id.SPI && (!id.Dst.IsValid() || s.Dst() == id.Dst) {
			victim = s
			break
		}
	}
	if err := n.sad.Delete(id.Dir, id.SPI, id.Dst); err != nil {
		return err
	}
	delete(n.owners, victim)
	return nil
}

// AddPolicy adds p under owner. An interface must have p's if_id.
func (n *Node) AddPolicy(owner Owner, p sa.Policy) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.reg.Lookup(p.IfID) == nil {
		return fmt.Errorf("%w: if_id: no interface has if_id %d", ErrInvalid, p.IfID)
	}
	if err := n.sad.AddPolicy(p); err != nil {
		return err
	}
	n.policyOwners[idOf(p)] = owner
	return nil
}

// DeletePolicy removes the policy with p's direction, if_id and
// selector, whoever owns it.
func (n *Node) DeletePolicy(p sa.Policy) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.sad.DeletePolicy(p); err != nil {
		return err
	}
	delete(n.policyOwners, idOf(p))
	return nil
}

// RemoveOwner removes every SA and policy of owner in one table change
// (an IKE SA that ends takes its children with it) and returns how many
// SAs and policies went.
func (n *Node) RemoveOwner(owner Owner) (states, policies int, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var keep []*sa.SA
	for _, s := range n.sad.States() {
		if o, ok := n.owners[s]; ok && o == owner {
			states++
			continue
		}
		keep = append(keep, s)
	}
	var pols []sa.Policy
	for _, p := range n.sad.Policies() {
		if o, ok := n.policyOwners[idOf(p)]; ok && o == owner {
			policies++
			continue
		}
		pols = append(pols, p)
	}
	if err := n.sad.Replace(keep, pols); err != nil {
		return 0, 0, err
	}
	for s, o := range n.owners {
		if o == owner {
			delete(n.owners, s)
		}
	}
	for id, o := range n.policyOwners {
		if o == owner {
			delete(n.policyOwners, id)
		}
	}
	return states, policies, nil
}

// InstallChild installs an inbound and an outbound SA (one IKE child SA,
// or a hand-keyed pair) under owner in one table change, and removes the
// SAs that replaces names in the same change (make-before-break: the new
// outbound SA seals from that change on; the old inbound SA, should the
// peer still use it for packets in flight, is best removed by a second
// call a little later, so replaces may be empty here). Either both new
// SAs are installed or neither; the configs' keys are zeroed before it
// returns. The inbound SPI should come from AllocSPI, whose reservation
// it ends. A replaced SA must belong to owner (ErrOwned).
func (n *Node) InstallChild(owner Owner, in, out sa.Config, replaces ...StateID) error {
	defer in.ClearKeys()
	defer out.ClearKeys()
	if in.Dir != sa.DirIn || out.Dir != sa.DirOut {
		return fmt.Errorf("%w: dir: want an inbound and an outbound SA, got %s and %s", ErrInvalid, in.Dir, out.Dir)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range []*sa.Config{&in, &out} {
		if err := n.checkNewLocked(c); err != nil {
			return err
		}
	}
	pair := config.KeyOwners{}
	pair.Add(&in, "the inbound SA")
	if f, prev, used := pair.Conflict(&out); used {
		return fmt.Errorf("%w: outbound %s: the same key as %s: each direction needs keys of its own", ErrInvalid, f, prev)
	}
	drop := map[*sa.SA]bool{}
	all := n.sad.States()
	for _, id := range replaces {
		i := slices.IndexFunc(all, func(s *sa.SA) bool {
			return s.Dir() == id.Dir && s.SPI() == id.SPI && (!id.Dst.IsValid() || s.Dst() == id.Dst)
		})
		if i < 0 {
			return fmt.Errorf("replaces %s: %w", id, sa.ErrNotFound)
		}
		if o := n.owners[all[i]]; o != owner {
			return fmt.Errorf("replaces %s: %w (%q)", id, ErrOwned, o)
		}
		drop[all[i]] = true
	}
	sIn, err := n.MakeSA(in)
	if err != nil {
		return fmt.Errorf("%w: inbound: %w", ErrInvalid, err)
	}
	sOut, err := n.MakeSA(out)
	if err != nil {
		sIn.Discard()
		return fmt.Errorf("%w: outbound: %w", ErrInvalid, err)
	}
	states := slices.DeleteFunc(all, func(s *sa.SA) bool { return drop[s] })
	states = append(states, sIn, sOut)
	if err := n.sad.Replace(states, n.sad.Policies()); err != nil {
		sIn.Discard()
		sOut.Discard()
		return err
	}
	for s := range drop {
		delete(n.owners, s)
	}
	n.owners[sIn], n.owners[sOut] = owner, owner
	n.rememberKeysLocked(sIn, sOut)
	delete(n.reserved, in.SPI)
	return nil
}

// AllocSPI returns a random inbound SPI that no inbound SA of the node
// has and AllocSPI has not handed out before (RFC 4303 §2.1: 1-255 are
// reserved by IANA, 0 is never sent). The SPI stays reserved until an
// SA with it is installed (InstallChild) or ReleaseSPI is called.
func (n *Node) AllocSPI() (uint32, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for range 64 {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			return 0, err
		}
		spi := binary.BigEndian.Uint32(b[:])
		if spi < 256 || n.reserved[spi] || n.sad.LookupIn(spi, netip.Addr{}) != nil {
			continue
		}
		n.reserved[spi] = true
		return spi, nil
	}
	return 0, errors.New("no free inbound SPI found in 64 tries")
}

// ReleaseSPI ends the reservation of an SPI of AllocSPI that will not be
// installed (a negotiation that failed).
func (n *Node) ReleaseSPI(spi uint32) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.reserved, spi)
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
	case run.Lifetime != file.Lifetime:
		field = "lifetime"
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
