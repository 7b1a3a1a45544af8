package ikenode

import (
	"time"
)

// The Access-Accept's Session-Timeout and Idle-Timeout (RFC 2865 §5.27,
// §5.28) bound an eap-radius client's IKE SA: when the session has lasted
// Session-Timeout, or no packet crossed any of its children for
// Idle-Timeout, the gateway deletes the IKE SA (its Stop says
// Session-Timeout or Idle-Timeout). A rekey hands the bounds on with the
// session; they apply with accounting on or off.

// radiusLimits are an IKE SA's bounds from RADIUS.
type radiusLimits struct {
	sessionEnd time.Time     // zero without Session-Timeout
	idle       time.Duration // zero without Idle-Timeout
	// lastActive is when the children's packet count last changed,
	// count that count, checkAt when it is read next.
	lastActive time.Time
	count      uint64
	checkAt    time.Time
}

// idleCheckEvery is how often the children's counters are read for
// Idle-Timeout: a second at most, finer when the timeout is short.
const idleCheckEvery = time.Second

// setRADIUSLimits takes x's bounds from its relay's Access-Accept, as x
// comes up. Before startAccounting, which forgets the relay.
func (m *Daemon) setRADIUSLimits(x *ikeSA, now time.Time) {
	r := m.relays[x.sa]
	if r == nil {
		return
	}
	a := r.cv.Accept()
	if a == nil || (a.SessionTimeout <= 0 && a.IdleTimeout <= 0) {
		return
	}
	l := &radiusLimits{idle: a.IdleTimeout, lastActive: now, checkAt: now}
	if a.SessionTimeout > 0 {
		l.sessionEnd = now.Add(a.SessionTimeout)
	}
	if l.idle > 0 && m.cfg.Stats == nil {
		m.log.WithFields(x.fields()).Warn("radius: Idle-Timeout not honoured: no traffic counters")
		l.idle = 0
	}
	x.limits = l
}

// radiusLimitPassed is the reason to end x, when a bound of RADIUS has
// passed; "" when none has.
func (m *Daemon) radiusLimitPassed(x *ikeSA, now time.Time) string {
	l := x.limits
	if l == nil {
		return ""
	}
	if !l.sessionEnd.IsZero() && !now.Before(l.sessionEnd) {
		return ReasonSessionTimeout
	}
	if l.idle <= 0 || now.Before(l.checkAt) {
		return ""
	}
	l.checkAt = now.Add(min(idleCheckEvery, l.idle/4))
	if n := m.packetsOf(x); n != l.count {
		// Any change is traffic: a rekeyed child's successor starts
		// its counters anew, and the rekey itself is the peer's doing.
		l.count, l.lastActive = n, now
		return ""
	}
	if now.Sub(l.lastActive) >= l.idle {
		return ReasonIdleTimeout
	}
	return ""
}

// packetsOf is how many packets x's installed children carried, both
// ways.
func (m *Daemon) packetsOf(x *ikeSA) uint64 {
	var n uint64
	for _, c := range x.sa.Children() {
		rec := m.children[c]
		if rec == nil {
			continue
		}
		if st, ok := m.cfg.Stats(rec.in); ok {
			n += st.Packets
		}
		if st, ok := m.cfg.Stats(rec.out); ok && rec.outbound {
			n += st.Packets
		}
	}
	return n
}
