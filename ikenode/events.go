package ikenode

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/internal/printable"
)

// Types of Event, as ipsecd monitor names them (strongSwan's vici
// events ike-updown, ike-rekey, child-updown and child-rekey, and the
// failures an operator watches for).
const (
	EventIKEUp        = "ike_up"        // an IKE SA is established
	EventIKEDown      = "ike_down"      // an established IKE SA ended (Reason)
	EventIKEFailed    = "ike_failed"    // an IKE SA ended before it was established (Reason, Error)
	EventIKERekeyed   = "ike_rekeyed"   // an IKE SA (OldSPIs) was replaced by a new one (SPIs)
	EventChildUp      = "child_up"      // a child's SAs are installed
	EventChildDown    = "child_down"    // a child's SAs were removed (Reason)
	EventChildRekeyed = "child_rekeyed" // a child (OldSPIIn, OldSPIOut) was replaced by a new one (Reason: by whom)
	EventChildFailed  = "child_failed"  // a child was refused or could not be installed; its IKE SA stays (Reason, Error)
)

// Reasons an IKE SA or a child ended or failed (Event.Reason).
const (
	ReasonDeletedByPeer  = "deleted by peer"
	ReasonTerminated     = "terminated"      // ipsecd ike terminate
	ReasonReload         = "reload"          // the connection was removed or changed
	ReasonShutdown       = "shutdown"        // the daemon stopped
	ReasonExpired        = "expired"         // not rekeyed within its lifetime (IKE: rekey_time + 10%; child: life_time)
	ReasonTimeout        = "timeout"         // the peer stopped answering (DPD or retransmissions)
	ReasonInitialContact = "initial contact" // the peer restarted: it sent INITIAL_CONTACT on a new IKE SA
	ReasonLimit          = "limit"           // more IKE SAs with the peer than ike.max_ike_sas_per_peer
	ReasonReplaced       = "replaced"        // a new IKE SA of its identity replaced it (unique: replace)
	ReasonSessionTimeout = "session timeout" // RADIUS's Session-Timeout passed
	ReasonIdleTimeout    = "idle timeout"    // no traffic for RADIUS's Idle-Timeout
	ReasonAuthFailed     = "authentication failed"
	ReasonNoProposal     = "no proposal chosen"
	ReasonTSUnacceptable = "TS unacceptable"
	ReasonInvalidKE      = "invalid KE"
	ReasonInstallFailed  = "install failed" // the node refused the child's SAs
	ReasonIKEDown        = "ike down"       // its IKE SA ended (the IKE SA's own event says why)
	ReasonError          = "error"          // another error: see Error
	ReasonRekeyedByUs    = "rekeyed by us"
	ReasonRekeyedByPeer  = "rekeyed by peer"
)

// Event is an IKE SA or a child that came up, went down, was rekeyed or
// failed: what Config.OnEvent is told. Type says which fields are set;
// empty ones are not.
type Event struct {
	Type string
	// Connection names the connection; Child the child (child_*).
	Connection, Child string
	// SPIInitiator and SPIResponder are the IKE SA's SPIs, 16 hex
	// digits as ike list shows them; OldSPIInitiator and
	// OldSPIResponder the IKE SA that ike_rekeyed replaced.
	SPIInitiator, SPIResponder       string
	OldSPIInitiator, OldSPIResponder string
	// Local and Remote are the IKE SA's addresses and ports.
	Local, Remote netip.AddrPort
	// LocalID and PeerID are the identities as ike list shows them
	// (escaped: the peer chooses its identity's bytes); PeerID is empty
	// before the peer authenticated.
	LocalID, PeerID string
	// EAPID is the EAP identity the peer proved (escaped), VIPs the
	// virtual IPs leased to it or given to us, space-separated: so that
	// ike_up and ike_down tell when a road warrior's lease goes online
	// and offline.
	EAPID, VIPs string
	// SPIIn and SPIOut are the child's ESP SPIs (%#x); OldSPIIn and
	// OldSPIOut the child that child_rekeyed replaced.
	SPIIn, SPIOut       string
	OldSPIIn, OldSPIOut string
	// Reason is one of the Reason constants; Error the error's text,
	// escaped, when an error ended it.
	Reason, Error string
}

// emit hands ev to Config.OnEvent. It runs in the Run goroutine, so
// OnEvent must not block (the daemon's control.Monitor.Publish does
// not).
func (m *Daemon) emit(ev Event) {
	if m.cfg.OnEvent != nil {
		m.cfg.OnEvent(ev)
	}
}

// ikeEvent is an event of type typ about x.
func ikeEvent(typ string, x *ikeSA) Event {
	l, r := x.sa.Addrs()
	i, rs := x.sa.SPIs()
	var vips []string
	for _, a := range append(x.sa.VirtualIPs(), x.sa.LocalVirtualIPs()...) {
		vips = append(vips, a.String())
	}
	return Event{Type: typ, Connection: x.conn.cfg.Name, SPIInitiator: spiHex(i), SPIResponder: spiHex(rs),
		Local: l, Remote: r, LocalID: x.sa.LocalID().String(), PeerID: peerText(x.sa),
		EAPID: printable.Escape(x.sa.EAPIdentity()), VIPs: strings.Join(vips, " ")}
}

// childEvent is an event of type typ about child c of x.
func childEvent(typ string, x *ikeSA, c *ike.Child) Event {
	ev := ikeEvent(typ, x)
	ev.Child, ev.SPIIn, ev.SPIOut = c.Name, fmt.Sprintf("%#x", c.InSPI), fmt.Sprintf("%#x", c.OutSPI)
	return ev
}

// reasonOf names the error that ended an IKE SA or refused a child.
func reasonOf(err error) string {
	switch {
	case errors.Is(err, ike.ErrAuthFailed):
		return ReasonAuthFailed
	case errors.Is(err, ike.ErrNoProposalChosen):
		return ReasonNoProposal
	case errors.Is(err, ike.ErrTSUnacceptable):
		return ReasonTSUnacceptable
	case errors.Is(err, ike.ErrTimeout):
		return ReasonTimeout
	case errors.Is(err, ike.ErrInvalidKE):
		return ReasonInvalidKE
	}
	return ReasonError
}

// errText is err's text for Event.Error, escaped (it may quote what the
// peer sent); "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return printable.Escape(err.Error())
}

// endEvent is the event of x's end, or false when there is none: an SA
// a rekey replaced (ike_rekeyed said so), or our half of simultaneous
// rekeys that lost.
func endEvent(x *ikeSA) (Event, bool) {
	if x.rekeyed && x.why == "" {
		return Event{}, false
	}
	typ := EventIKEDown
	if x.up.IsZero() {
		typ = EventIKEFailed
	}
	ev := ikeEvent(typ, x)
	err := x.sa.Err()
	ev.Error = errText(err)
	switch {
	case x.why != "":
		ev.Reason = x.why
	case err != nil:
		ev.Reason = reasonOf(err)
	case x.sa.State() == ike.StateDeleted:
		ev.Reason = ReasonDeletedByPeer
	default:
		ev.Reason = ReasonError
	}
	return ev, true
}
