package eapradius

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"layeh.com/radius"
	"layeh.com/radius/rfc2865"
	"layeh.com/radius/rfc2866"
	"layeh.com/radius/rfc2869"
)

// Cause is why a session ended: RFC 2866 §5.10's Acct-Terminate-Cause.
type Cause uint32

const (
	CauseUserRequest    Cause = 1  // the client deleted its IKE SA
	CauseLostCarrier    Cause = 2  // the client stopped answering (DPD)
	CauseIdleTimeout    Cause = 4  // Idle-Timeout passed without traffic
	CauseSessionTimeout Cause = 5  // Session-Timeout reached
	CauseAdminReset     Cause = 6  // an administrator terminated it
	CauseAdminReboot    Cause = 7  // the daemon is stopping on an operator's word
	CauseNASError       Cause = 9  // the gateway failed the session
	CauseNASRequest     Cause = 10 // the gateway ended it (a rekey failed, a reload removed it)
	CauseNASReboot      Cause = 11 // the daemon restarted without a Stop
)

// Usage is what a session carried, seen from the gateway: In is what
// the client sent (the inbound SAs), Out what it was sent.
type Usage struct {
	InOctets, OutOctets, InPackets, OutPackets uint64
}

// Session is one client's session as accounting reports it.
type Session struct {
	// ID is the Acct-Session-Id, unique on this gateway across restarts
	// (the daemon uses the IKE SA's SPIs).
	ID       string
	UserName string // the EAP identity, or the User-Name of the Accept
	Peer     Peer
	// FramedIP and FramedIPv6 are the client's virtual IPs.
	FramedIP, FramedIPv6 netip.Addr
	Class                [][]byte // the Accept's Class values, echoed
	// Interim is how often Interim-Updates go out: the Accept's
	// Acct-Interim-Interval, else the config's; 0 for none.
	Interim time.Duration
	// Usage returns the session's counters so far; it is called from a
	// timer's goroutine for the Interim-Updates, so it must be safe for
	// that (the SAs' counters are atomic). nil reports zeros.
	Usage func() Usage
}

// Accounting reports sessions to the Client's servers (RFC 2866): On at
// start, Start when a session's first child is up, Interim-Update at its
// interval, Stop with its usage and cause, Off at the end. Every request
// is sent in the background with the Client's retransmissions and
// failover; one that no server acknowledges is logged. Safe for
// concurrent use.
type Accounting struct {
	c   *Client
	log logrus.FieldLogger
	// mu guards sessions (the started ones, by ID) and closed.
	mu       sync.Mutex
	sessions map[string]*acctSession
	closed   bool
	inflight sync.WaitGroup
	// stops counts the Stops not yet answered (or given up), those held
	// for their Start (see Stop) included, which Off waits for.
	stops sync.WaitGroup
}

type acctSession struct {
	Session
	start time.Time
	timer *time.Timer // the next Interim-Update's, nil without interim
	// mu guards startPending and heldStop. It is the session's own, not
	// Accounting.mu, because the Start's answer may be delivered while
	// Accounting.mu is held (a closed client answers at once).
	mu sync.Mutex
	// startPending is true until the Start is answered or given up;
	// heldStop is the Stop made meanwhile, sent once it is (see Stop).
	startPending bool
	heldStop     *radius.Packet
}

// NewAccounting returns an Accounting over c.
func (c *Client) NewAccounting() *Accounting {
	return &Accounting{c: c, log: c.cfg.Log, sessions: map[string]*acctSession{}}
}

// ErrSessionExists is the error of Start for an ID already started.
var ErrSessionExists = errors.New("eapradius: accounting session already started")

// On sends Accounting-On: the gateway (re)started, so that the server
// closes what it still holds open of this NAS (RFC 2866 §5.1). done, if
// not nil, is called with the outcome.
func (a *Accounting) On(done func(error)) { a.nas(rfc2866.AcctStatusType_Value_AccountingOn, done) }

// Off sends Accounting-Off: the gateway stops, and its sessions with it.
// It first waits for the Stops sent or held for their Start (each at
// most the servers' tries), so that none follows the Off.
func (a *Accounting) Off(done func(error)) {
	a.stops.Wait()
	a.nas(rfc2866.AcctStatusType_Value_AccountingOff, done)
}

func (a *Accounting) nas(status rfc2866.AcctStatusType, done func(error)) {
	p := radius.New(radius.CodeAccountingRequest, nil)
	rfc2866.AcctStatusType_Set(p, status)
	p.Add(rfc2866.AcctSessionID_Type, radius.Attribute(fmt.Sprintf("%s-%d", status, time.Now().Unix())))
	p.Add(rfc2865.NASIdentifier_Type, radius.Attribute(a.c.cfg.NASIdentifier))
	addNASAddr(p, a.c.cfg.NASIP) // none without nas_ip: the socket's (Client.ask)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		if done != nil {
			done(ErrClosed)
		}
		return
	}
	a.send(p, status.String(), "", done)
}

// Start reports s begun and schedules its Interim-Updates.
func (a *Accounting) Start(s Session) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.sessions[s.ID]; ok {
		return fmt.Errorf("%w: %q", ErrSessionExists, s.ID)
	}
	if a.closed {
		return ErrClosed
	}
	as := &acctSession{Session: s, start: time.Now(), startPending: true}
	a.sessions[s.ID] = as
	a.send(a.record(as, rfc2866.AcctStatusType_Value_Start, Usage{}, 0), "Start", s.ID, func(error) { a.started(as) })
	a.scheduleLocked(as)
	return nil
}

// started is called when the Start of as is answered or given up: a
// Stop held for it goes now.
func (a *Accounting) started(as *acctSession) {
	as.mu.Lock()
	as.startPending = false
	p := as.heldStop
	as.heldStop = nil
	as.mu.Unlock()
	if p != nil {
		// inflight and stops counted it in Stop.
		a.dispatch(p, "Stop", as.ID, func(error) { a.stops.Done() })
	}
}

// scheduleLocked arms the session's next Interim-Update. mu held.
func (a *Accounting) scheduleLocked(as *acctSession) {
	if as.Interim <= 0 {
		return
	}
	as.timer = time.AfterFunc(as.Interim, func() { a.interim(as.ID) })
}

// interim sends an Interim-Update of the session and arms the next.
func (a *Accounting) interim(id string) {
	a.mu.Lock()
	as, ok := a.sessions[id]
	if !ok || a.closed {
		a.mu.Unlock()
		return
	}
	a.mu.Unlock()
	u := as.usage()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sessions[id] != as || a.closed {
		return // stopped while the counters were read
	}
	as.mu.Lock()
	pending := as.startPending
	as.mu.Unlock()
	if pending {
		// The Start is still unanswered: an update of a session the
		// server has not opened would only confuse it; the next
		// interval tries again.
		a.scheduleLocked(as)
		return
	}
	a.send(a.record(as, rfc2866.AcctStatusType_Value_InterimUpdate, u, 0), "Interim-Update", id, nil)
	a.scheduleLocked(as)
}

func (as *acctSession) usage() Usage {
	if as.Usage == nil {
		return Usage{}
	}
	return as.Usage()
}

// Stop reports the session ended with its final usage and cause; false
// when it was not started (nothing is sent). A Stop never overtakes its
// Start: while the Start waits for its answer (a session of a few
// seconds, a server slow to answer or a Start retransmitted), the Stop,
// made now with the usage and session time of now, is held and sent
// once the Start is answered or given up. Otherwise a server that saw
// the Stop first would take the late Start for a session that is open
// (and an SQL pool would keep its address leased).
func (a *Accounting) Stop(id string, u Usage, cause Cause) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	as, ok := a.sessions[id]
	if !ok || a.closed {
		return false
	}
	delete(a.sessions, id)
	if as.timer != nil {
		as.timer.Stop()
	}
	p := a.record(as, rfc2866.AcctStatusType_Value_Stop, u, cause)
	a.stops.Add(1)
	as.mu.Lock()
	defer as.mu.Unlock()
	if as.startPending {
		as.heldStop = p
		a.inflight.Add(1) // under mu, as send's: Close waits for it
		return true
	}
	a.send(p, "Stop", id, func(error) { a.stops.Done() })
	return true
}

// Sessions returns the IDs of the sessions started and not stopped.
func (a *Accounting) Sessions() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	ids := make([]string, 0, len(a.sessions))
	for id := range a.sessions {
		ids = append(ids, id)
	}
	return ids
}

// Close stops the Interim-Updates and waits for the requests in flight
// (each at most the servers' tries); it sends no Stop: call Stop for
// each session and Off first, as the daemon does at its end.
func (a *Accounting) Close() {
	a.mu.Lock()
	a.closed = true
	for _, as := range a.sessions {
		if as.timer != nil {
			as.timer.Stop()
		}
	}
	a.mu.Unlock()
	a.inflight.Wait()
}

// record builds the Accounting-Request of a session (RFC 2866 §5, the
// attributes strongSwan's eap-radius sends).
func (a *Accounting) record(as *acctSession, status rfc2866.AcctStatusType, u Usage, cause Cause) *radius.Packet {
	p := radius.New(radius.CodeAccountingRequest, nil)
	rfc2866.AcctStatusType_Set(p, status)
	p.Add(rfc2866.AcctSessionID_Type, radius.Attribute(as.ID))
	if as.UserName != "" {
		p.Add(rfc2865.UserName_Type, radius.Attribute(as.UserName))
	}
	p.Add(rfc2865.NASIdentifier_Type, radius.Attribute(a.c.cfg.NASIdentifier))
	p.Add(rfc2865.ServiceType_Type, uint32Attr(uint32(rfc2865.ServiceType_Value_FramedUser)))
	p.Add(rfc2865.NASPortType_Type, uint32Attr(uint32(rfc2865.NASPortType_Value_Virtual)))
	p.Add(rfc2865.NASPort_Type, uint32Attr(as.Peer.NASPort))
	addStation(p, rfc2865.CalledStationID_Type, as.Peer.Called)
	addStation(p, rfc2865.CallingStationID_Type, as.Peer.Calling)
	addNASAddr(p, a.c.nasAddr(as.Peer.Called.Addr()))
	if as.FramedIP.Is4() {
		p.Add(rfc2865.FramedIPAddress_Type, radius.Attribute(as.FramedIP.AsSlice()))
	}
	if as.FramedIPv6.Is6() {
		p.Add(framedIPv6AddressType, radius.Attribute(as.FramedIPv6.AsSlice()))
	}
	for _, c := range as.Class {
		if len(c) > 0 && len(c) <= maxAttrValue {
			p.Add(rfc2865.Class_Type, radius.Attribute(c))
		}
	}
	if status == rfc2866.AcctStatusType_Value_Start {
		return p
	}
	// Octets past 2^32 go in the Gigawords (RFC 2869 §5.1, §5.2).
	p.Add(rfc2866.AcctInputOctets_Type, uint32Attr(uint32(u.InOctets)))
	p.Add(rfc2869.AcctInputGigawords_Type, uint32Attr(uint32(u.InOctets>>32)))
	p.Add(rfc2866.AcctOutputOctets_Type, uint32Attr(uint32(u.OutOctets)))
	p.Add(rfc2869.AcctOutputGigawords_Type, uint32Attr(uint32(u.OutOctets>>32)))
	p.Add(rfc2866.AcctInputPackets_Type, uint32Attr(uint32(min(u.InPackets, 1<<32-1))))
	p.Add(rfc2866.AcctOutputPackets_Type, uint32Attr(uint32(min(u.OutPackets, 1<<32-1))))
	p.Add(rfc2866.AcctSessionTime_Type, uint32Attr(uint32(time.Since(as.start)/time.Second)))
	if status == rfc2866.AcctStatusType_Value_Stop && cause != 0 {
		p.Add(rfc2866.AcctTerminateCause_Type, binary.BigEndian.AppendUint32(nil, uint32(cause)))
	}
	return p
}

// send hands p to the client in the background; a record no server
// acknowledged is logged. mu held, so that no send follows Close's Wait.
func (a *Accounting) send(p *radius.Packet, what, id string, done func(error)) {
	a.inflight.Add(1)
	a.dispatch(p, what, id, done)
}

// dispatch is send once inflight counts p.
func (a *Accounting) dispatch(p *radius.Packet, what, id string, done func(error)) {
	a.c.exchange(p, nil, func(ans answer) {
		defer a.inflight.Done()
		if ans.err != nil {
			a.log.WithFields(logrus.Fields{"record": what, "session": id, "error": ans.err.Error()}).Warn("radius: accounting record not acknowledged")
		}
		if done != nil {
			done(ans.err)
		}
	})
}
