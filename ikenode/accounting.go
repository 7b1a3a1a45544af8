package ikenode

import (
	"fmt"

	"github.com/ipsecd/ipsecd/eapradius"
)

// RADIUS accounting of the IKE SAs whose users RADIUS authenticated
// (remote auth eap-radius, Config.Accounting): a session starts when the
// IKE SA is up with its first child, follows the SA through IKE rekeys
// (the same Acct-Session-Id), counts the bytes and packets of every child
// it had, those rekeyed away included, and stops with the SA, with a
// cause from why it ended.

// acctSession is an IKE SA's accounting session.
type acctSession struct {
	id    string
	owner *ikeSA          // the IKE SA it runs on now (a rekey moves it)
	gone  eapradius.Usage // what the children removed so far carried
}

// startAccounting starts x's session, when x's user was authenticated by
// RADIUS (its relay holds the Access-Accept) and accounting is on.
func (m *Daemon) startAccounting(x *ikeSA) {
	r := m.relays[x.sa]
	delete(m.relays, x.sa)
	if r == nil || m.cfg.Accounting == nil {
		return
	}
	ispi, rspi := x.sa.SPIs()
	s := &acctSession{id: fmt.Sprintf("%016x%016x", ispi, rspi), owner: x}
	local, remote := x.sa.Addrs()
	sess := eapradius.Session{ID: s.id, UserName: x.sa.EAPIdentity(), Interim: m.cfg.AccountingInterval,
		Peer:  eapradius.Peer{NASPort: r.nasPort, Calling: remote, Called: local},
		Usage: func() eapradius.Usage { return m.usageFromOutside(s) }}
	if a := r.cv.Accept(); a != nil {
		sess.Class = a.Class
		if a.InterimInterval > 0 {
			sess.Interim = a.InterimInterval
		}
	}
	for _, ip := range x.sa.VirtualIPs() {
		if ip.Is4() {
			sess.FramedIP = ip
		} else {
			sess.FramedIPv6 = ip
		}
	}
	if err := m.cfg.Accounting.Start(sess); err != nil {
		m.log.WithError(err).WithFields(x.fields()).Warn("radius: accounting start")
		return
	}
	x.acct = s
}

// usageOf sums what s's children carried: those installed now and those
// gone. Run goroutine.
func (m *Daemon) usageOf(s *acctSession) eapradius.Usage {
	u := s.gone
	for _, rec := range m.children {
		if rec.owner == s.owner {
			m.addUsage(&u, rec)
		}
	}
	return u
}

// usageFromOutside is usageOf for the Interim-Update timer's goroutine:
// read in the Run goroutine; zeros when that does not answer in time.
func (m *Daemon) usageFromOutside(s *acctSession) eapradius.Usage {
	var u eapradius.Usage
	m.do(func() { u = m.usageOf(s) })
	return u
}

// addUsage adds the counters of rec's SAs to u: inbound is what the
// client sent.
func (m *Daemon) addUsage(u *eapradius.Usage, rec *installed) {
	if m.cfg.Stats == nil {
		return
	}
	if st, ok := m.cfg.Stats(rec.in); ok {
		u.InOctets += st.Bytes
		u.InPackets += st.Packets
	}
	if st, ok := m.cfg.Stats(rec.out); ok && rec.outbound {
		u.OutOctets += st.Bytes
		u.OutPackets += st.Packets
	}
}

// childGone keeps what rec carried in its IKE SA's session, before its
// SAs leave the node.
func (m *Daemon) childGone(rec *installed) {
	if s := rec.owner.acct; s != nil {
		m.addUsage(&s.gone, rec)
	}
}

// stopAccounting stops x's session (its children are removed already:
// their counters are in gone), unless a rekey moved it on.
func (m *Daemon) stopAccounting(x *ikeSA, reason string) {
	delete(m.relays, x.sa)
	s := x.acct
	if s == nil || x.rekeyed || m.cfg.Accounting == nil {
		return
	}
	x.acct = nil
	m.cfg.Accounting.Stop(s.id, s.gone, acctCause(reason, x.sa.Err()))
}

// acctCause is the Acct-Terminate-Cause of an IKE SA's end (RFC 2866
// §5.10, as strongSwan's eap-radius maps them).
func acctCause(reason string, err error) eapradius.Cause {
	switch reason {
	case ReasonDeletedByPeer:
		return eapradius.CauseUserRequest
	case ReasonTerminated:
		return eapradius.CauseAdminReset
	case ReasonShutdown:
		return eapradius.CauseAdminReboot
	case ReasonTimeout:
		return eapradius.CauseLostCarrier
	case ReasonSessionTimeout:
		return eapradius.CauseSessionTimeout
	case ReasonIdleTimeout:
		return eapradius.CauseIdleTimeout
	case ReasonExpired, ReasonReload, ReasonLimit, ReasonInitialContact:
		return eapradius.CauseNASRequest
	}
	if err != nil {
		return eapradius.CauseNASError
	}
	return eapradius.CauseUserRequest
}

// moveAccounting hands x's session and RADIUS's bounds to n, which a
// rekey made.
func moveAccounting(x, n *ikeSA) {
	n.limits, x.limits = x.limits, nil
	if s := x.acct; s != nil {
		s.owner, n.acct, x.acct = n, s, nil
	}
}
