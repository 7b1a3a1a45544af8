package ike

import (
	"errors"
	"fmt"
)

// Errors an exchange ends with. ErrDropped wraps the reason a message was
// ignored (the caller counts it); the others end the SA (State Failed).
var (
	ErrDropped           = errors.New("ike: message dropped")
	ErrNoProposalChosen  = errors.New("ike: no proposal chosen")
	ErrAuthFailed        = errors.New("ike: authentication failed")
	ErrTSUnacceptable    = errors.New("ike: traffic selectors unacceptable")
	ErrTimeout           = errors.New("ike: peer did not answer")
	ErrInvalidKE         = errors.New("ike: peer asked for a group we did not offer")
	ErrProtocol          = errors.New("ike: peer violated the protocol")
	ErrChildFailed       = errors.New("ike: IKE SA up, CHILD_SA refused")
	ErrUnsupportedChange = errors.New("ike: exchange not supported yet")
	// ErrDuplicate (wrapped with ErrAuthFailed) ends a responder's SA
	// that Config.Admit refused: its peer's identity holds another IKE
	// SA that stays (unique = keep).
	ErrDuplicate = errors.New("ike: the identity holds an IKE SA already (unique: keep)")
)

func dropped(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrDropped}, args...)...)
}

// ErrBusy wraps the error of a peer's request refused with
// TEMPORARY_FAILURE (§2.25): an exchange under way overlaps it, and the
// peer retries. (Our own requests wait in the queue instead, see Next.)
var ErrBusy = errors.New("ike: an exchange is outstanding")

// Errors of the calls that start an exchange (RekeyIKE, RekeyChild,
// CreateChild, DeleteChild, Delete, Ping) on an SA that cannot take it:
// nothing was sent, and the SA is unchanged.
var (
	// ErrNotEstablished: the IKE SA is not up (yet, or any more). Wait
	// for EventIKEUp, or start again with a new SA.
	ErrNotEstablished = errors.New("ike: IKE SA is not established")
	// ErrRekeyed: the IKE SA was rekeyed; ask the new one (the
	// EventIKERekeyed's SA), which holds the children now.
	ErrRekeyed = errors.New("ike: IKE SA was rekeyed")
	// ErrNoChild: the child is not one of the IKE SA's (any more), or
	// the IKE SA is not up. Look it up again in Children.
	ErrNoChild = errors.New("ike: no such child on an established IKE SA")
)
