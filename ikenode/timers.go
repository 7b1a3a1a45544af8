package ikenode

import (
	"time"

	"github.com/ipsecd/ipsecd/ike"
)

// The daemon's timers, run by its ticker: the engine's retransmissions,
// the IKE SA's and the children's rekeys and lifetimes, liveness checks,
// NAT keepalives and start_action's retries. What a timer starts, the
// engine runs (or queues) and reports like any exchange.

// tick runs the timers: the engine's retransmissions, rekeys, lifetimes,
// liveness checks, keepalives, and start_action's retries.
func (m *Daemon) tick(now time.Time) {
	for _, x := range m.sas {
		switch {
		case !x.ended:
			m.tickSA(x, now)
		case x.deleting():
			// Our delete waits for its answer (RFC 7296 §2.4): it is
			// retransmitted, its children long gone, until answered
			// or out of tries; the grace runs from then.
			m.retransmit(x, now)
			x.endedAt = now
		}
	}
	// Forget the SAs that are over, a little later, so that the answer
	// to their last request still finds them. One whose delete is
	// outstanding stays: at most as long as its retransmissions last.
	keep := m.sas[:0]
	for _, x := range m.sas {
		if x.ended && !x.deleting() && now.Sub(x.endedAt) > endedGrace {
			m.index.remove(x)
			m.wipe(x)
			continue
		}
		keep = append(keep, x)
	}
	clear(m.sas[len(keep):])
	m.sas = keep
	for _, name := range m.connOrder {
		c := m.conns[name]
		if !c.retryAt.IsZero() && !now.Before(c.retryAt) {
			c.retryAt = time.Time{}
			if m.liveSA(c) == nil {
				if err := m.initiate(c, c.retry, now); err != nil {
					m.log.WithError(err).WithField("connection", c.cfg.Name).Warn("ike: initiate failed")
					m.retryLater(c, c.retry, now)
				}
			}
		}
	}
	m.removeLingering(now)
}

// retransmit has x's engine retransmit its outstanding request, or give
// up on it, when its time has come.
func (m *Daemon) retransmit(x *ikeSA, now time.Time) {
	if t := x.sa.NextTimeout(); !t.IsZero() && !now.Before(t) {
		wasUp := x.sa.State() == ike.StateEstablished
		out, err := x.sa.Tick(now)
		if out != nil {
			if wasUp && x.sa.State() == ike.StateDeleted {
				// Not a retransmission: the engine deletes an SA a
				// rekey replaced, which the peer did not delete.
				m.log.WithFields(x.fields()).Info("ike: the peer did not delete the IKE SA its rekey replaced: deleting it")
			} else {
				m.ctr.retransmits.Add(1)
			}
			m.request(x, out)
		}
		if err != nil {
			m.log.WithError(err).WithFields(x.fields()).Info("ike: exchange timed out")
		}
		m.afterCall(x, now)
	}
}

func (m *Daemon) tickSA(x *ikeSA, now time.Time) {
	m.retransmit(x, now)
	if x.ended || x.sa.State() != ike.StateEstablished {
		return
	}
	bound := ""
	if !x.rekeyed {
		bound = m.radiusLimitPassed(x, now) // radiuslimits.go
	}
	switch {
	case !x.expireAt.IsZero() && !now.Before(x.expireAt):
		m.log.WithFields(x.fields()).Warn("ike: IKE SA not rekeyed within its lifetime: deleting it")
		x.expireAt = time.Time{}
		x.why = ReasonExpired
		m.deleteSA(x, now)
		return
	case bound != "":
		x.why = bound
		m.log.WithFields(x.fields()).WithField("reason", x.why).Info("ike: RADIUS's bound passed: deleting the IKE SA")
		x.limits = nil
		m.deleteSA(x, now)
		return
	case !x.rekeyAt.IsZero() && !now.Before(x.rekeyAt) && !x.rekeyed:
		// Queued behind an exchange under way, if any.
		if out, err := x.sa.RekeyIKE(now); err == nil {
			x.rekeyAt = time.Time{}
			m.request(x, out)
			return
		}
		x.rekeyAt = now.Add(time.Second) // try again soon
	}
	if !x.rekeyed {
		m.deleteFailed(x, now)
		m.tickChildren(x, now)
	}
	m.next(x, now)
	if x.ended {
		return
	}
	busy := !x.sa.NextTimeout().IsZero()
	if d := x.conn.cfg.DPDDelay; d > 0 && !busy && now.Sub(x.sa.LastHeard()) >= d {
		if out, err := x.sa.Ping(now); err == nil {
			m.request(x, out)
		}
	}
	if m.cfg.NATT != nil && x.sa.NAT() && !now.Before(x.keepaliveAt) {
		x.keepaliveAt = now.Add(m.keepalive)
		l, r := x.sa.Addrs()
		if err := m.cfg.NATT.WriteKeepalive(r, l.Addr()); err != nil {
			m.ctr.sendErrors.Add(1)
		}
	}
}

// endedGrace is how long an SA that ended stays routable: the peer's
// answer to our delete, or its retransmissions, are then taken in
// silence rather than counted as for no SA.
const endedGrace = 2 * time.Second

// rekeyRetry is how long after starting a child's rekey it is tried
// again, if the engine says the child is still installed and not being
// rekeyed (the rekey failed: the peer refused or did not answer it).
const rekeyRetry = time.Minute

// tickChildren rekeys or deletes the children of x that are due: the
// first now when x is idle, the others queued behind it.
func (m *Daemon) tickChildren(x *ikeSA, now time.Time) {
	for _, c := range x.sa.Children() {
		in := m.children[c]
		if in == nil {
			continue
		}
		if c.State() != ike.ChildInstalled {
			continue // being rekeyed or deleted, or replaced already
		}
		switch {
		case !in.lifeAt.IsZero() && !now.Before(in.lifeAt):
			if out, err := x.sa.DeleteChild(c, now); err == nil {
				in.lifeAt = time.Time{}
				in.why = ReasonExpired
				m.log.WithFields(x.fields()).WithField("child", c.Name).Warn("ike: child not rekeyed within life_time: deleting it")
				m.request(x, out)
			}
		case !in.rekeyAt.IsZero() && !now.Before(in.rekeyAt):
			if out, err := x.sa.RekeyChild(c, now); err == nil {
				in.rekeyAt = now.Add(rekeyRetry)
				m.request(x, out)
			}
		}
	}
}

// deleteSA starts deleting x; its children go at once (the peer's answer
// only confirms, RFC 7296 §1.4.1). x stays, routed, while the engine
// retransmits the delete (tick).
func (m *Daemon) deleteSA(x *ikeSA, now time.Time) {
	if st := x.sa.State(); st != ike.StateEstablished && !x.ended && st != ike.StateFailed && st != ike.StateDeleted {
		// On its way up: nothing authenticated to delete yet. It ends
		// here, as a reload ends one.
		m.down(x, now)
		return
	}
	out, err := x.sa.Delete(now)
	if err == nil && out == nil {
		// One exchange at a time (RFC 7296 §2.3): the engine sends
		// the delete once the one under way is answered (next); if it
		// is not, the SA fails and goes all the same.
		m.log.WithFields(x.fields()).Info("ike: delete queued behind the exchange under way")
		return
	}
	if err != nil {
		m.log.WithError(err).WithFields(x.fields()).Warn("ike: delete")
	}
	m.request(x, out)
	m.afterCall(x, now)
}
