package ikenode

import (
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/internal/printable"
)

// A connection's unique keep and replace (swanctl's uniqueness policy)
// act when a peer authenticates, before the responder's IKE_AUTH answer
// establishes its SA (ike.Config.Admit), as strongSwan's
// check_uniqueness does: keep refuses the new SA, replace deletes the
// old ones first, so that their virtual IPs are free for the new SA's
// configuration payload and a client that lost its state gets its
// address again. no and never act on INITIAL_CONTACT alone (contact.go).

// sameUser reports whether y is another live IKE SA of x's user as
// uniqueness sees it: on x's connection, towards the same local
// identity, over the same address family (strongSwan's too), with the
// same EAP identity when x's peer proved one (its IKE identity, often
// an address behind a NAT, proves nothing then), else the same IKE
// identity proved with the same kind of credential. An SA a rekey
// replaced, or that is already going, is not counted.
func sameUser(x, y *ikeSA) bool {
	if y == x || y.ended || y.rekeyed || y.conn != x.conn || y.sa.State() != ike.StateEstablished ||
		!y.sa.LocalID().Equal(x.sa.LocalID()) || family(x) != family(y) {
		return false
	}
	if id := x.sa.EAPIdentity(); id != "" {
		return y.sa.EAPIdentity() == id
	}
	return y.sa.EAPIdentity() == "" && y.sa.PeerID().Equal(x.sa.PeerID()) && y.sa.PeerAuth() == x.sa.PeerAuth()
}

// family reports whether x's peer is at an IPv4 address.
func family(x *ikeSA) bool {
	_, r := x.sa.Addrs()
	return r.Addr().Unmap().Is4()
}

// admit is the engine's ike.Config.Admit: whether the responder SA s,
// whose peer just authenticated, may be established under its
// connection's unique. contact: its request carried INITIAL_CONTACT. It
// runs inside s's HandleFrom, in the Run goroutine.
func (m *Daemon) admit(s *ike.SA, contact bool) bool {
	x := m.ikeSAOf(s)
	if x == nil {
		return true
	}
	policy := x.conn.cfg.Unique
	if policy != config.UniqueKeep && policy != config.UniqueReplace {
		return true
	}
	var olds []*ikeSA
	for _, y := range m.sas {
		if sameUser(x, y) {
			olds = append(olds, y)
		}
	}
	if len(olds) == 0 {
		return true
	}
	f := logrus.Fields{"peer_id": x.sa.PeerID().String(), "unique": string(policy)}
	if id := x.sa.EAPIdentity(); id != "" {
		f["eap_id"] = printable.Escape(id)
	}
	if policy == config.UniqueKeep && !contact {
		m.ctr.uniqueRefused.Add(1)
		i, r := olds[0].sa.SPIs()
		m.log.WithFields(x.fields()).WithFields(f).WithFields(logrus.Fields{"kept_spi_i": spiHex(i), "kept_spi_r": spiHex(r)}).
			Warn("ike: the peer's identity holds an IKE SA already: the new one is refused with AUTHENTICATION_FAILED (unique: keep)")
		return false
	}
	// replace, or INITIAL_CONTACT under either: the peer restarted,
	// and strongSwan's keep drops the old SAs for it too. Done here,
	// not at EventInitialContact, so that their leases are free for
	// this SA's configuration payload.
	now := m.clock.Now()
	for _, y := range olds {
		m.replace(y, contact, now)
	}
	m.log.WithFields(x.fields()).WithFields(f).WithFields(logrus.Fields{"replaced": len(olds), "initial_contact": contact}).
		Info("ike: the peer's identity held IKE SAs: replaced by the new one")
	return true
}

// replace ends y, which a new IKE SA of its user replaces: with a Delete
// to its peer, unless the new SA carried INITIAL_CONTACT (the peer
// forgot y: dropped as contact.go drops one) or an exchange of y's is
// under way (dropped then, as limitPeer drops one); its children go now
// and its leases are given back, so that the new SA takes them.
func (m *Daemon) replace(y *ikeSA, contact bool, now time.Time) {
	y.rekeyed, y.dropped = true, true // no dpd_action or retry follows; listed DELETING
	if contact {
		m.log.WithFields(y.fields()).Info("ike: the peer restarted (INITIAL_CONTACT): dropping its old IKE SA")
		y.why = ReasonInitialContact
	} else {
		m.ctr.uniqueReplaced.Add(1)
		m.log.WithFields(y.fields()).Info("ike: replaced by a new IKE SA of its identity (unique: replace): deleting it")
		y.why = ReasonReplaced
	}
	if !contact && !y.sa.Busy() {
		if out, err := y.sa.Delete(now); err == nil {
			m.request(y, out)
			m.afterCall(y, now)
		}
	}
	if !y.ended {
		m.down(y, now)
	}
	y.sa.ReleaseLeases()
}
