package ikenode

import (
	"errors"
	"net/netip"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/ike"
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
	// acct is its RADIUS accounting session, nil without (accounting.go);
	// limits its Session-Timeout and Idle-Timeout (radiuslimits.go).
	acct   *acctSession
	limits *radiusLimits
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
	x := &ikeSA{sa: s, conn: c}
	m.sas = append(m.sas, x)
	m.index.add(x)
	return x
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
		m.addVIPs(x)     // vips.go
		m.updateResolv() // resolv.go
		m.setRADIUSLimits(x, now)
		method := m.eapMethodOf(x) // before startAccounting, which forgets the relay
		m.startAccounting(x)
		x.conn.backoff = 0
		f := logrus.Fields{"peer_id": x.sa.PeerID().String(), "suite": x.sa.Suite().String()}
		if id := x.sa.EAPIdentity(); id != "" {
			m.ctr.countEAP(method, true)
			f["eap_id"], f["vips"] = printable.Escape(id), x.sa.VirtualIPs()
		}
		m.log.WithFields(x.fields()).WithFields(f).Info("ike: IKE SA established")
		m.emit(ikeEvent(EventIKEUp, x))
		m.limitPeer(x, now)
	case ike.EventIKERekeyed:
		n := m.add(e.SA, x.conn, now)
		m.established(n, now)
		moveAccounting(x, n)
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
		m.childUp(x, e.Child, e.InboundOnly, now)
	case ike.EventChildOutbound:
		m.childOutbound(e.Child)
	case ike.EventChildDown:
		m.childDown(e.Child)
	case ike.EventChildMoved:
		// An IKE rekey moved the child to e.SA, reported before
		// (EventIKERekeyed): its end, not x's, takes the child now.
		if rec, y := m.children[e.Child], m.ikeSAOf(e.SA); rec != nil && y != nil {
			rec.owner = y
			m.moveChild(y, rec)
		}
	case ike.EventSPIUnused:
		m.cfg.Node.ReleaseSPI(e.SPI)
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
		m.removeChild(c, in, 0)
		if !wasEnded && in.outbound {
			cev := childEvent(EventChildDown, x, c)
			cev.Reason = childReason
			m.emit(cev)
		}
	}
	if report {
		m.emit(ev)
	}
	m.stopAccounting(x, ev.Reason)
	m.dropVIPs(x)
	m.updateResolv()
	if !x.rekeyed {
		l := m.log.WithFields(x.fields())
		if err := x.sa.Err(); err != nil {
			l = l.WithError(err)
		}
		l.Info("ike: IKE SA down")
	}
}

// wipe has x's engine wipe its keys, and releases the SPIs of the
// exchanges it drops with them (EventSPIUnused).
func (m *Daemon) wipe(x *ikeSA) {
	x.sa.Wipe()
	for _, e := range x.sa.TakeEvents() {
		if e.Kind == ike.EventSPIUnused {
			m.cfg.Node.ReleaseSPI(e.SPI)
		}
	}
}

// ikeSAOf returns the ikeSA of engine SA s, or nil.
func (m *Daemon) ikeSAOf(s *ike.SA) *ikeSA {
	for _, y := range m.sas {
		if y.sa == s {
			return y
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

func spiHex(v uint64) string {
	const hexdigits = "0123456789abcdef"
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = hexdigits[v&0xf]
		v >>= 4
	}
	return string(b[:])
}
