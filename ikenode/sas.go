package ikenode

import (
	"errors"
	"net/netip"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/ike/eap"
	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/internal/printable"
)

// ikeSA is one IKE SA with the daemon's timers around it.
type ikeSA struct {
	sa   *ike.SA
	conn *conn
	// up is when it was established (or made by a rekey); zero before.
	up time.Time
	// rekeyAt and expireAt are when the IKE SA is rekeyed and, if that
	// has not replaced it, deleted (rekey_time with jitter, and
	// rekey_time + 10%); zero when not set.
	rekeyAt, expireAt time.Time
	// keepaliveAt is when the next NAT keepalive goes.
	keepaliveAt time.Time
	// remote is the peer's address and port the children last followed
	// (followPeer).
	remote netip.AddrPort
	// ended: the children are removed and the SA only waits for its
	// outstanding exchange (a delete's retransmissions) to end.
	ended   bool
	endedAt time.Time
	// rekeyed: a newer SA replaces this one (EventIKERekeyed), or the
	// peer restarted (INITIAL_CONTACT, dropped set too): either way no
	// dpd_action or retry follows its end.
	rekeyed bool
	// dropped: the peer restarted and forgot this SA (initialContact);
	// ike list shows it DELETING while it lingers.
	dropped bool
	// terminated: terminate or a reload asked for it, which a rekey
	// that completes meanwhile hands over to the new SA (the engine
	// moves the queued delete to it).
	terminated bool
	// why is the reason of its end when we end it (or INITIAL_CONTACT
	// or a limit does): its event's Reason; empty when the peer or an
	// error ends it.
	why string
	// rekeying holds the children we started to rekey, and when.
	rekeying map[*ike.Child]time.Time
	// Where m.index has it: its SPIs, the key of its IKE_SA_INIT (zero
	// when not there), and whether it is counted half-open, from which
	// address.
	spis         [2]uint64
	init         initKey
	halfOpen     bool
	halfOpenFrom netip.Addr
	// failed are children the node refused to install, which the peer
	// believes up: deleteFailed deletes them with the peer, one at a
	// time, once no exchange of ours is outstanding.
	failed []*ike.Child
	// first is the child our IKE_AUTH proposed (initiator).
	first string
}

// deleting reports whether x's engine still retransmits the delete of
// an SA that is over: tick keeps it and its routing until then.
func (x *ikeSA) deleting() bool {
	return x.sa.State() == ike.StateDeleted && !x.sa.NextTimeout().IsZero()
}

func (x *ikeSA) fields() logrus.Fields {
	l, r := x.sa.Addrs()
	i, rs := x.sa.SPIs()
	return logrus.Fields{"connection": x.conn.cfg.Name, "local": l, "remote": r, "spi_i": spiHex(i), "spi_r": spiHex(rs)}
}

// add routes SA s of connection c from now on.
func (m *Daemon) add(s *ike.SA, c *conn, now time.Time) *ikeSA {
	x := &ikeSA{sa: s, conn: c, rekeying: map[*ike.Child]time.Time{}}
	m.sas = append(m.sas, x)
	m.index.add(x)
	return x
}

// match returns the connection that answers a peer at remote talking to
// local, the first in the file.
func (m *Daemon) match(local, remote netip.Addr) *conn {
	for _, name := range m.connOrder {
		if c := m.conns[name]; c.admits(local, remote) {
			return c
		}
	}
	return nil
}

// handle processes one datagram.
func (m *Daemon) handle(p packet, now time.Time) {
	h := message.Header(p.b)
	if !h.IsValid() {
		m.ctr.malformed.Add(1)
		return
	}
	isResponse := h.Flags()&message.FlagResponse != 0
	x := m.index.find(h, p.remote.Addr())
	if x == nil {
		if isResponse || h.ExchangeType() != message.IKESAInit {
			m.ctr.noSA.Add(1) // a late message of an SA that is gone
			return
		}
		reply, pass := m.cookies.Check(p.b, p.remote, m.index.halfOpen, now)
		if !pass {
			m.ctr.cookies.Add(1)
			if reply != nil {
				m.send(reply, p.local, p.remote)
			}
			return
		}
		if blocked, full := m.index.halfOpenLimited(p.remote.Addr(), m.limits.BlockThreshold, m.limits.InitLimitHalfOpen); blocked || full {
			// Dropped without an answer, as strongSwan does: the
			// initiator retries, and gets through once its earlier
			// SAs completed or timed out.
			if blocked {
				m.ctr.blocked.Add(1)
				m.log.WithField("remote", p.remote).Debug("ike: IKE_SA_INIT dropped: block_threshold half-open IKE SAs from this address")
			} else {
				m.ctr.halfOpenFull.Add(1)
				m.log.WithField("remote", p.remote).Debug("ike: IKE_SA_INIT dropped: init_limit_half_open half-open IKE SAs")
			}
			return
		}
		c := m.match(p.local.Addr(), p.remote.Addr())
		if c == nil {
			m.ctr.noConnection.Add(1)
			m.log.WithFields(logrus.Fields{"local": p.local, "remote": p.remote}).Debug("ike: IKE_SA_INIT for no connection")
			return
		}
		s, out, err := ike.Respond(c.ec, p.local, p.remote, p.b, now)
		m.count(h, err)
		if s != nil {
			x = m.add(s, c, now)
			m.afterCall(x, now)
		}
		if err != nil {
			m.log.WithError(err).WithFields(logrus.Fields{"connection": c.cfg.Name, "remote": p.remote}).Info("ike: IKE_SA_INIT refused")
			if s == nil && errors.Is(err, ike.ErrNoProposalChosen) {
				// Refused before there was an SA: an ike_failed all
				// the same. (INVALID_KE is no failure: the initiator
				// tries again with the group asked for.)
				m.emit(Event{Type: EventIKEFailed, Connection: c.cfg.Name, SPIInitiator: spiHex(h.ISPI()), SPIResponder: spiHex(0),
					Local: p.local, Remote: p.remote, Reason: reasonOf(err), Error: errText(err)})
			}
		}
		if out != nil {
			m.send(out, p.local, p.remote)
		}
		return
	}
	if x.ended && x.sa.State() == ike.StateEstablished {
		m.ctr.noSA.Add(1) // dropped by us (INITIAL_CONTACT, a reload): nothing of it is installed any more
		return
	}
	creating := x.sa.CreatingNow()
	if h.ExchangeType() == message.IKEAuth {
		creating = x.first
	}
	out, err := x.sa.HandleFrom(p.b, p.local, p.remote, now)
	m.count(h, err)
	if err != nil && !errors.Is(err, ike.ErrDropped) {
		m.log.WithError(err).WithFields(x.fields()).WithField("exchange", h.ExchangeType().String()).Warn("ike: exchange failed")
	}
	// What the message brought goes into the SAD before anything
	// leaves that lets the peer use it: our IKE_AUTH or CREATE_CHILD_SA
	// answer (the peer sends on the new child once it has it), or the
	// delete of the old child after our rekey (the peer then switches
	// to the new one).
	m.afterCall(x, now)
	if errors.Is(err, ike.ErrChildFailed) && x.sa.State() == ike.StateEstablished {
		// The IKE SA stays; the child was refused, by the peer or by
		// us. Named when it is ours; the peer's offer names none.
		ev := ikeEvent(EventChildFailed, x)
		if isResponse {
			ev.Child = creating
		}
		ev.Reason, ev.Error = reasonOf(err), errText(err)
		m.emit(ev)
	}
	if out != nil {
		if isResponse {
			// What follows a response is our next request (IKE_AUTH,
			// the delete after a rekey): it goes to Addrs().
			m.request(x, out)
		} else {
			m.sendAll(x, out, p.local, p.remote)
		}
	}
	// A child that could not be installed is deleted after the answer
	// that brought it, so that the peer knows its SPI when the delete
	// comes. Then the next exchange of ours waiting, if any.
	m.deleteFailed(x, now)
	m.next(x, now)
}

// deleteFailed starts deleting x's children that the node refused to
// install (RFC 7296 §1.4.1: an INFORMATIONAL with a Delete of its ESP
// SPI), so that the peer stops sending into an SA that does not exist:
// the first now when x is idle, the others queued behind it.
func (m *Daemon) deleteFailed(x *ikeSA, now time.Time) {
	if x.ended {
		return
	}
	for i, c := range x.failed {
		x.failed[i] = nil
		// An error: no longer x's (the peer deleted it, or the IKE SA
		// ended).
		if out, err := x.sa.DeleteChild(c, now); err == nil {
			m.request(x, out)
		}
	}
	x.failed = x.failed[:0]
}

// count records one handled message.
func (m *Daemon) count(h message.Header, err error) {
	res := resultOK
	switch {
	case errors.Is(err, ike.ErrDropped):
		res = resultDropped
	case err != nil:
		res = resultFailed
	}
	if errors.Is(err, ike.ErrAuthFailed) {
		m.ctr.authFailures.Add(1)
	}
	if ae := (*eap.AuthError)(nil); errors.As(err, &ae) {
		m.ctr.countEAP(ae.Method, false)
	}
	m.ctr.exchange(h.ExchangeType(), res)
}

// afterCall acts on what an SA reported after any call: its events, and
// its end.
func (m *Daemon) afterCall(x *ikeSA, now time.Time) {
	for _, e := range x.sa.TakeEvents() {
		m.event(x, e, now)
	}
	m.followPeer(x)
	switch x.sa.State() {
	case ike.StateFailed, ike.StateDeleted:
		if !x.ended {
			m.down(x, now)
			m.afterEnd(x, now)
		}
	}
	m.index.update(x)
}

// event acts on one event of x.
func (m *Daemon) event(x *ikeSA, e ike.Event, now time.Time) {
	switch e.Kind {
	case ike.EventIKEUp:
		m.established(x, now)
		x.conn.backoff = 0
		f := logrus.Fields{"peer_id": x.sa.PeerID().String(), "suite": x.sa.Suite().String()}
		if id := x.sa.EAPIdentity(); id != "" {
			m.ctr.countEAP(x.sa.PeerAuth().EAPType(), true)
			f["eap_id"], f["vips"] = printable.Escape(id), x.sa.VirtualIPs()
		}
		m.log.WithFields(x.fields()).WithFields(f).Info("ike: IKE SA established")
		m.emit(ikeEvent(EventIKEUp, x))
		m.limitPeer(x, now)
	case ike.EventIKERekeyed:
		n := m.add(e.SA, x.conn, now)
		m.established(n, now)
		x.rekeyed = true
		x.rekeyAt, x.expireAt = time.Time{}, time.Time{}
		n.failed, x.failed = x.failed, nil // they moved with the other children
		if x.terminated {
			n.terminated = true // its queued delete moved to n with the rest
		}
		n.why, x.why = x.why, "" // x is replaced: n's end says why

		m.log.WithFields(n.fields()).Info("ike: IKE SA rekeyed")
		ev := ikeEvent(EventIKERekeyed, n)
		oi, or := x.sa.SPIs()
		ev.OldSPIInitiator, ev.OldSPIResponder = spiHex(oi), spiHex(or)
		m.emit(ev)
		m.limitPeer(n, now)
		m.afterCall(n, now)
	case ike.EventIKEDeleting:
		// Our new SA lost simultaneous rekeys and is deleted at once:
		// routed, and ticked as ended, while its delete waits for an
		// answer (tick), then forgotten. Nothing of it was installed.
		n := m.add(e.SA, x.conn, now)
		n.rekeyed = true // no dpd_action or retry, no "down" line
		m.down(n, now)
		m.log.WithFields(n.fields()).Info("ike: our IKE rekey lost a collision: deleting its SA")
	case ike.EventChildUp:
		m.childUp(x, e.Child, now)
	case ike.EventChildDown:
		m.childDown(e.Child)
	case ike.EventInitialContact:
		// The peer restarted: what we hold of its previous life goes
		// before the new child is installed (the event comes first).
		m.initialContact(x, now)
	case ike.EventIKEDown:
		// afterCall sees the state and ends it.
	}
}

// established starts x's timers and writes its keylog line.
func (m *Daemon) established(x *ikeSA, now time.Time) {
	x.up = now
	if rt := x.conn.cfg.RekeyTime; rt > 0 {
		x.rekeyAt = now.Add(jitter(rt))
		x.expireAt = now.Add(rt + rt/10)
	}
	m.keylog.logIKE(x.sa)
}

// down ends x: the children it holds go (those that moved to a rekeyed
// SA stay with it).
func (m *Daemon) down(x *ikeSA, now time.Time) {
	wasEnded := x.ended
	x.ended, x.endedAt = true, now
	m.index.update(x)
	ev, report := endEvent(x)
	report = report && !wasEnded
	childReason := ReasonIKEDown
	if report {
		childReason = ev.Reason
	}
	for c, in := range m.children {
		if in.owner != x {
			continue
		}
		if y := m.holder(c, x); y != nil {
			in.owner = y
			m.moveChild(y, in)
			continue
		}
		m.removeChild(c, in, 0)
		if !wasEnded && !c.Redundant {
			cev := childEvent(EventChildDown, x, c)
			cev.Reason = childReason
			m.emit(cev)
		}
	}
	if report {
		m.emit(ev)
	}
	if !x.rekeyed {
		l := m.log.WithFields(x.fields())
		if err := x.sa.Err(); err != nil {
			l = l.WithError(err)
		}
		l.Info("ike: IKE SA down")
	}
}

// holder returns the live SA other than x that holds child c.
func (m *Daemon) holder(c *ike.Child, x *ikeSA) *ikeSA {
	for _, y := range m.sas {
		if y == x || y.ended {
			continue
		}
		for _, yc := range y.sa.Children() {
			if yc == c {
				return y
			}
		}
	}
	return nil
}

// afterEnd decides what follows the end of x: dpd_action for a peer that
// stopped answering, start_action start's retry for a first attempt that
// failed.
func (m *Daemon) afterEnd(x *ikeSA, now time.Time) {
	c := x.conn
	if x.rekeyed || m.conns[c.cfg.Name] != c {
		return // replaced, or the connection was removed or changed
	}
	err := x.sa.Err()
	if !x.up.IsZero() && errors.Is(err, ike.ErrTimeout) {
		// dpd_action is each child's: restart brings those up again
		// under one new IKE SA, trap traps them, clear does nothing.
		l := m.log.WithFields(x.fields())
		if trap := c.childrenOnDPD(config.DPDActionTrap); len(trap) > 0 {
			if !m.cfg.Trap {
				l.WithField("children", trap).Info("ike: peer dead, dpd_action trap (not supported by this build): cleared")
			} else {
				l.WithField("children", trap).Info("ike: peer dead, dpd_action trap: cleared; traffic brings them up again")
				for _, name := range trap {
					m.trap(c, name)
				}
			}
		}
		if restart := c.childrenOnDPD(config.DPDActionRestart); len(restart) > 0 && m.liveSA(c) == nil {
			l.WithField("children", restart).Info("ike: peer dead, dpd_action restart: initiating again")
			if err := m.initiate(c, restart, now); err != nil {
				m.retryLater(c, restart, now)
			}
		}
		if clr := c.childrenOnDPD(config.DPDActionClear); len(clr) > 0 {
			l.WithField("children", clr).Info("ike: peer dead, dpd_action clear: cleared")
		}
		return
	}
	if start := c.childrenStarting(config.StartActionStart); x.up.IsZero() && x.sa.IsInitiator() && len(start) > 0 && m.liveSA(c) == nil {
		m.retryLater(c, start, now)
	}
}

// liveSA returns an SA of c that is up or on its way, or nil.
func (m *Daemon) liveSA(c *conn) *ikeSA {
	for _, x := range m.sas {
		if x.conn == c && !x.ended && !x.rekeyed {
			return x
		}
	}
	return nil
}

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
			x.sa.Wipe()
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
	m.expireSPIs(now)
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
	switch {
	case !x.expireAt.IsZero() && !now.Before(x.expireAt):
		m.log.WithFields(x.fields()).Warn("ike: IKE SA not rekeyed within its lifetime: deleting it")
		x.expireAt = time.Time{}
		x.why = ReasonExpired
		m.deleteSA(x, now)
		return
	case !x.rekeyAt.IsZero() && !now.Before(x.rekeyAt) && !x.rekeyed && x.sa.RekeyNeedsFollowupKE():
		x.rekeyAt = time.Time{}
		m.reestablish(x, now)
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

// rekeyRetry is how long after starting a child's rekey that has not
// completed it is tried again.
const rekeyRetry = time.Minute

// tickChildren rekeys or deletes the children of x that are due: the
// first now when x is idle, the others queued behind it.
func (m *Daemon) tickChildren(x *ikeSA, now time.Time) {
	for _, c := range x.sa.Children() {
		in := m.children[c]
		if in == nil {
			continue
		}
		if started, ok := x.rekeying[c]; ok {
			if now.Sub(started) < rekeyRetry {
				continue
			}
			// The rekey failed (the peer refused or did not answer
			// it): try again.
			delete(x.rekeying, c)
			in.rekeyAt = now
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
				x.rekeying[c] = now
				in.rekeyAt = time.Time{}
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

func spiHex(v uint64) string {
	const hexdigits = "0123456789abcdef"
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = hexdigits[v&0xf]
		v >>= 4
	}
	return string(b[:])
}
