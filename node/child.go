package node

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/ipsecd/ipsecd/sa"
)

// RemoveOwner removes every SA and policy of owner in one table change
// (an IKE SA that ends takes its children with it) and returns how many
// SAs and policies went.
func (n *Node) RemoveOwner(owner Owner) (states, policies int, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	defer n.notifyLocked(n.snapshotLocked(), "owner removed")
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
			n.forgetLocked(s)
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
	pair := sa.KeyOwners{}
	pair.Add(&in, "the inbound SA")
	if f, prev, used := pair.Conflict(&out); used {
		return fmt.Errorf("%w: outbound %s: the same key as %s: each direction needs keys of its own", ErrInvalid, f, prev)
	}
	drop, err := n.ownedStatesLocked(owner, "replaces", replaces)
	if err != nil {
		return err
	}
	sIn, err := n.makeSA(in, owner.FreshKeys())
	if err != nil {
		return fmt.Errorf("%w: inbound: %w", ErrInvalid, err)
	}
	sOut, err := n.makeSA(out, owner.FreshKeys())
	if err != nil {
		sIn.Discard()
		return fmt.Errorf("%w: outbound: %w", ErrInvalid, err)
	}
	if err := n.sad.Update(drop, []*sa.SA{sIn, sOut}); err != nil {
		sIn.Discard()
		sOut.Discard()
		return err
	}
	n.notifyChildLocked(drop, "rekeyed", sIn, sOut)
	for _, s := range drop {
		n.forgetLocked(s)
	}
	n.owners[sIn], n.owners[sOut] = owner, owner
	n.rememberKeysLocked(owner, sIn, sOut)
	delete(n.reserved, in.SPI)
	return nil
}

// RemoveStates removes the SAs ids names, all of owner's, in one table
// change, or none of them: an IKE child's pair once its replacement
// carries the traffic (EventChildDown). An id that matches no SA is
// sa.ErrNotFound; one of another owner, ErrOwned.
func (n *Node) RemoveStates(owner Owner, ids ...StateID) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	drop, err := n.ownedStatesLocked(owner, "state", ids)
	if err != nil {
		return err
	}
	if err := n.sad.Update(drop, nil); err != nil {
		return err
	}
	n.notifyChildLocked(drop, "child down")
	for _, s := range drop {
		n.forgetLocked(s)
	}
	return nil
}

// ownedStatesLocked returns the running SAs ids name, each once, all
// owner's: sa.ErrNotFound for an id that names none, ErrOwned for one of
// another owner, the error's text starting with what and the id. It costs a lookup
// per id, whatever the number of SAs.
func (n *Node) ownedStatesLocked(owner Owner, what string, ids []StateID) ([]*sa.SA, error) {
	var states []*sa.SA
	for _, id := range ids {
		s := n.sad.Lookup(id.Dir, id.SPI, id.Dst)
		if s == nil {
			return nil, fmt.Errorf("%s %s: %w", what, id, sa.ErrNotFound)
		}
		if o := n.owners[s]; o != owner {
			return nil, fmt.Errorf("%s %s: %w (%q)", what, id, ErrOwned, o)
		}
		if !slices.Contains(states, s) {
			states = append(states, s)
		}
	}
	return states, nil
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

// SetPeer moves the outbound ESP-in-UDP SA id, owner's, to peer (the
// peer's new NAT mapping, sa.SA.SetPeer): its packets go there from the
// next batch on, under the same keys and sequence numbers, with no
// moment when the SA is missing.
func (n *Node) SetPeer(owner Owner, id StateID, peer netip.AddrPort) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.sad.Lookup(id.Dir, id.SPI, id.Dst)
	if s == nil || IDOf(s) != id {
		return fmt.Errorf("state %s: %w", id, sa.ErrNotFound)
	}
	if o := n.owners[s]; o != owner {
		return fmt.Errorf("state %s: %w (%q)", id, ErrOwned, o)
	}
	return s.SetPeer(peer)
}
