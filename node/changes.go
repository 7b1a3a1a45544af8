package node

import (
	"fmt"

	"github.com/ipsecd/ipsecd/sa"
)

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
	s := n.sad.Lookup(id.Dir, id.SPI, id.Dst)
	return s != nil && IDOf(s) == id
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
	defer n.notifyLocked(n.snapshotLocked(), "")
	if err := n.checkNewLocked(&c); err != nil {
		return err
	}
	s, err := n.makeSA(c, owner.FreshKeys())
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := n.sad.Add(s); err != nil {
		s.Discard()
		return err
	}
	n.owners[s] = owner
	n.rememberKeysLocked(owner, s)
	return nil
}

// DeleteState removes the SA id names, whoever owns it, as `ip xfrm
// state delete` does; sa.ErrNotFound when there is none.
func (n *Node) DeleteState(id StateID) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	defer n.notifyLocked(n.snapshotLocked(), "deleted")
	victim := n.sad.Lookup(id.Dir, id.SPI, id.Dst)
	if err := n.sad.Delete(id.Dir, id.SPI, id.Dst); err != nil {
		return err
	}
	n.forgetLocked(victim)
	return nil
}

// AddPolicy adds p under owner. An interface must have p's if_id.
func (n *Node) AddPolicy(owner Owner, p sa.Policy) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	defer n.notifyLocked(n.snapshotLocked(), "")
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
	defer n.notifyLocked(n.snapshotLocked(), "")
	if err := n.sad.DeletePolicy(p); err != nil {
		return err
	}
	delete(n.policyOwners, idOf(p))
	return nil
}

// FlushStates removes every SA, whoever owns it, as `ip xfrm state
// flush` does, and returns how many it removed. Policies stay. The keys
// of the removed SAs stay used: a new SA needs fresh ones.
func (n *Node) FlushStates() (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	defer n.notifyLocked(n.snapshotLocked(), "flushed")
	removed := len(n.sad.States())
	if err := n.sad.Replace(nil, n.sad.Policies()); err != nil {
		return 0, err
	}
	for s := range n.owners {
		n.forgetLocked(s)
	}
	return removed, nil
}

// UpdateLifetime sets the limits of the SA id names, in place, whoever
// owns it (`ip xfrm state update`; sa.SA.SetLifetime says what changes).
// sa.ErrNotFound when there is none; an impossible lifetime wraps
// ErrInvalid. A reload sets a file's SA back to the file's limits.
func (n *Node) UpdateLifetime(id StateID, l sa.Lifetime) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.sad.Lookup(id.Dir, id.SPI, id.Dst)
	if s == nil || IDOf(s) != id {
		return fmt.Errorf("state %s: %w", id, sa.ErrNotFound)
	}
	if err := s.SetLifetime(l); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if n.events != nil {
		n.events(Event{Kind: EventStateUpdated, SA: s})
	}
	return nil
}
