package ike

import "fmt"

// EventKind says what an Event reports.
type EventKind uint8

const (
	EventIKEUp EventKind = iota + 1 // the IKE SA is established
	// EventChildUp: Child is ready to install: its inbound SA, and its
	// outbound SA too unless InboundOnly (the peer rekeyed a child, and
	// may not have our answer yet; or Child is Redundant).
	EventChildUp
	EventChildDown // Child was deleted (by either side, or with its IKE SA): remove it
	EventIKEDown   // the IKE SA and all its children are gone
	// EventIKERekeyed: SA is a new IKE SA that replaces this one; route
	// its SPIs to it. The children move to it (see Children) once the
	// rekey settles; after simultaneous rekeys (§2.8.2) one of the two
	// new SAs is deleted again, and the other gets the children. This
	// SA then only waits to be deleted.
	EventIKERekeyed
	// EventInitialContact: the peer, authenticated as Peer, said in its
	// IKE_AUTH request that this is the only IKE SA between its
	// identity and ours (INITIAL_CONTACT, RFC 7296 §2.4): it restarted,
	// and the other IKE SAs the daemon holds of the same connection
	// between the same two identities (Identity.Equal), proven the same
	// way (PeerAuth), are stale. Delete those and their children (not
	// this SA, nor SAs of other connections). It comes after EventIKEUp
	// and before the EventChildUp of the same IKE_AUTH, so that stale
	// children with the same selectors are gone before the new one is
	// installed.
	EventInitialContact
	// EventIKEDeleting: SA is a new IKE SA of ours that lost
	// simultaneous rekeys (§2.8.2) and is deleted at once: it holds no
	// children and is Deleted already, but its delete, which this
	// call returned, is retransmitted by its own Tick. Route its SPIs to
	// it while its NextTimeout is set, then forget it.
	EventIKEDeleting
	// EventChildOutbound: install the outbound SA of Child, whose
	// EventChildUp was InboundOnly: the child it replaces is being
	// deleted (its EventChildDown follows), so the peer has its new
	// pair (make-before-break).
	EventChildOutbound
	// EventChildMoved: Child now belongs to SA, the IKE SA that
	// replaces this one (an IKE rekey): the old SA's end does not take
	// it.
	EventChildMoved
	// EventSPIUnused: SPI, an inbound SPI Config.AllocSPI gave, will
	// not be installed (the exchange failed, was refused or dropped):
	// release it.
	EventSPIUnused
)

func (k EventKind) String() string {
	names := []string{"EventKind(0)", "IKEUp", "ChildUp", "ChildDown", "IKEDown", "IKERekeyed", "InitialContact", "IKEDeleting", "ChildOutbound", "ChildMoved", "SPIUnused"}
	if int(k) < len(names) {
		return names[k]
	}
	return fmt.Sprintf("EventKind(%d)", k)
}

// Event is a change the daemon acts on.
type Event struct {
	Kind  EventKind
	Child *Child
	SA    *SA      // EventIKERekeyed, EventIKEDeleting, EventChildMoved
	Peer  Identity // EventInitialContact: the peer's identity, as PeerID
	// InboundOnly (EventChildUp): install Child's inbound SA alone; its
	// outbound SA waits for EventChildOutbound.
	InboundOnly bool
	SPI         uint32 // EventSPIUnused
}
