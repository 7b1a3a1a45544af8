package ikenode

import (
	"errors"
	"net/netip"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/ike/eap"
	"github.com/ipsecd/ipsecd/ike/message"
)

// Datagrams in: each is routed to its IKE SA (or, an IKE_SA_INIT
// request, past the cookie and half-open limits to a new one) and
// handed to the engine, whose answer goes back after what it reported
// is installed.

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
		m.ctr.countEAPFailure(ae.Failure.String())
	}
	m.ctr.exchange(h.ExchangeType(), res)
}
