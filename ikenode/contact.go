package ikenode

import (
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/ike"
)

// INITIAL_CONTACT (RFC 7296 §2.4): the engine asks hasContact
// (ike.Config.HasContact) whether to send it, and reports the peer's as
// ike.EventInitialContact, which event hands to initialContact.
// Identities are compared as typed values (ike.Identity.Equal: the ID
// type and its bytes), never as the text they print as.

// hasContact reports whether an established IKE SA between the
// identities is up: when none is, our IKE_AUTH carries INITIAL_CONTACT
// and the peer drops what it kept of our previous life. local is our
// identity as the engine sends it (with a certificate and no local id,
// the certificate's subject), which each SA records (ike.SA.LocalID), so
// that the comparison is of like with like. Called by the engine from
// inside HandleFrom, in the Run goroutine, while it builds the IKE_AUTH
// request of an SA that is itself in m.sas, not yet established:
// counting SAs on their way would count that one, and INITIAL_CONTACT
// would never be sent.
func (m *Daemon) hasContact(local, remote ike.Identity) bool {
	for _, x := range m.sas {
		if x.ended || x.rekeyed || x.sa.State() != ike.StateEstablished {
			continue
		}
		if x.sa.LocalID().Equal(local) && x.sa.PeerID().Equal(remote) {
			return true
		}
	}
	return false
}

// samePeer reports whether y is another established IKE SA of x's
// connection with x's peer: the same typed identity, proved with the same
// kind of credential, towards the same local identity, and with EAP the
// same EAP identity. INITIAL_CONTACT and ike.max_ike_sas_per_peer act on
// those SAs alone. With EAP the IKE identity proves nothing (road
// warriors send their address, often the same private one behind
// different NATs, or any name): only the EAP identity tells users apart,
// and without it one user's INITIAL_CONTACT would drop another's SA.
func samePeer(x, y *ikeSA) bool {
	return y != x && !y.ended && y.conn == x.conn && y.sa.State() == ike.StateEstablished &&
		y.sa.PeerID().Equal(x.sa.PeerID()) && y.sa.PeerAuth() == x.sa.PeerAuth() && y.sa.LocalID().Equal(x.sa.LocalID()) &&
		y.sa.EAPIdentity() == x.sa.EAPIdentity()
}

// initialContact drops, without a delete (the peer forgot them), the
// other IKE SAs of from's connection whose peer proved the same identity
// with the same kind of credential, towards the same local identity,
// and their children: the peer restarted. SAs of other connections are
// left alone: a peer of a connection that takes any identity (remote id
// %any, a pre-shared key shared by many) could otherwise claim another
// connection's peer's identity and drop its SAs.
func (m *Daemon) initialContact(from *ikeSA, now time.Time) {
	peer := from.sa.PeerID()
	if from.conn.cfg.Unique == config.UniqueNever {
		// Clients that share an identity (a group PSK) each send it
		// at their first login; none replaces another.
		m.log.WithFields(from.fields()).WithField("peer_id", peer.String()).Info("ike: the peer sent INITIAL_CONTACT; ignored (unique: never)")
		return
	}
	dropped := 0
	for _, x := range m.sas {
		if !samePeer(from, x) {
			continue
		}
		m.log.WithFields(x.fields()).Info("ike: the peer restarted (INITIAL_CONTACT): dropping its old IKE SA")
		x.rekeyed = true // no dpd_action or retry follows
		x.dropped = true
		x.why = ReasonInitialContact
		m.down(x, now)
		dropped++
	}
	m.log.WithFields(from.fields()).WithFields(logrus.Fields{"peer_id": peer.String(), "dropped": dropped}).Info("ike: the peer sent INITIAL_CONTACT (it holds no other IKE SA with us)")
}
