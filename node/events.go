package node

import (
	"slices"

	"github.com/ipsecd/ipsecd/sa"
)

// EventKind is what changed, in the words of ip xfrm monitor.
type EventKind string

// The events a Node reports (Config.Events).
const (
	EventStateAdded    EventKind = "state_added"
	EventStateDeleted  EventKind = "state_deleted"  // by a delete, a flush, a reload, IKE, or its hard lifetime
	EventStateUpdated  EventKind = "state_updated"  // its limits changed in place
	EventStateExpired  EventKind = "state_expired"  // Expire says soft or hard, Reason which limit
	EventPolicyAdded   EventKind = "policy_added"   // Policy
	EventPolicyDeleted EventKind = "policy_deleted" // Policy
	EventInterfaceUp   EventKind = "interface_up"   // Interface, IfID
	EventInterfaceDown EventKind = "interface_down" // Interface, IfID
)

// Event is one change of a Node's SAs, policies or interfaces.
type Event struct {
	Kind EventKind
	// SA is the state of the state_* events; read its id, counters and
	// config, never keep it.
	SA        *sa.SA
	Policy    sa.Policy
	Interface string
	IfID      uint32
	// Expire is "soft" or "hard" for state_expired; Reason the limit
	// (sa's Reason* words) or, for state_deleted, why.
	Expire, Reason string
}

// snapshot is what the SAD held before a change, for notifyLocked.
type snapshot struct {
	states   []*sa.SA
	policies []sa.Policy
}

// snapshotLocked records the SAD's content before a change, when
// anyone listens for events. Call it as
//
//	defer n.notifyLocked(n.snapshotLocked(), "")
//
// after taking n.mu, so that the events go out before it is released, in
// the order of the changes.
func (n *Node) snapshotLocked() *snapshot {
	if n.events == nil {
		return nil
	}
	return &snapshot{states: n.sad.States(), policies: n.sad.Policies()}
}

// notifyLocked reports what changed in the SAD since before: SAs added
// and deleted (deleted ones with reason), policies added and deleted.
func (n *Node) notifyLocked(before *snapshot, reason string) {
	if before == nil {
		return
	}
	had := make(map[*sa.SA]bool, len(before.states))
	for _, s := range before.states {
		had[s] = true
	}
	now := n.sad.States()
	has := make(map[*sa.SA]bool, len(now))
	for _, s := range now {
		has[s] = true
	}
	for _, s := range before.states {
		if !has[s] {
			n.events(Event{Kind: EventStateDeleted, SA: s, Reason: reason})
		}
	}
	for _, s := range now {
		if !had[s] {
			n.events(Event{Kind: EventStateAdded, SA: s})
		}
	}
	hadPol := make(map[sa.Policy]bool, len(before.policies))
	for _, p := range before.policies {
		hadPol[p] = true
	}
	hasPol := map[sa.Policy]bool{}
	for _, p := range n.sad.Policies() {
		hasPol[p] = true
		if !hadPol[p] {
			n.events(Event{Kind: EventPolicyAdded, Policy: p})
		}
	}
	for _, p := range before.policies {
		if !hasPol[p] {
			n.events(Event{Kind: EventPolicyDeleted, Policy: p})
		}
	}
}

// notifyChildLocked reports what InstallChild or RemoveStates changed:
// the SAs dropped (with reason), then those added, each in States'
// order, as notifyLocked's diff would. They know what they changed, and
// the diff's two snapshots of every SA made each IKE child cost O(n log n)
// in the number of SAs.
func (n *Node) notifyChildLocked(dropped []*sa.SA, reason string, added ...*sa.SA) {
	if n.events == nil {
		return
	}
	gone := slices.SortedFunc(slices.Values(dropped), sa.CompareStates)
	for _, s := range gone {
		n.events(Event{Kind: EventStateDeleted, SA: s, Reason: reason})
	}
	for _, s := range slices.SortedFunc(slices.Values(added), sa.CompareStates) {
		n.events(Event{Kind: EventStateAdded, SA: s})
	}
}

// notifyInterfacesLocked reports the interfaces a SyncInterfaces brought
// up or took down; a replaced one goes down and comes up again.
func (n *Node) notifyInterfacesLocked(down, up []string, ids map[string]uint32) {
	if n.events == nil {
		return
	}
	for _, name := range down {
		n.events(Event{Kind: EventInterfaceDown, Interface: name, IfID: ids[name]})
	}
	for _, name := range up {
		n.events(Event{Kind: EventInterfaceUp, Interface: name, IfID: ids[name]})
	}
}
