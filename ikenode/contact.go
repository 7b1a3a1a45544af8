package ikenode

import (
	"time"

	"github.com/ipsecd/ipsecd/ike"
)

// INITIAL_CONTACT (RFC 7296 §2.4) is being added to the engine on another
// branch (ike.EventInitialContact, ike.Config.HasContact). These are the
// daemon's halves, ready for it: once merged, event() calls
// initialContact for ike.EventInitialContact and connsFrom sets
// ec.HasContact = m.hasContact.

// hasContact reports whether an IKE SA between the identities is up or
// on its way: when none is, our IKE_AUTH carries INITIAL_CONTACT and the
// peer drops what it kept of our previous life. Called by the engine from
// inside HandleFrom, in the Run goroutine.
func (m *Manager) hasContact(localID, remoteID string) bool {
	for _, x := range m.sas {
		if x.ended || x.rekeyed || x.conn.ec.LocalID != localID {
			continue
		}
		if x.sa.PeerID() == remoteID || (x.sa.PeerID() == "" && x.conn.ec.RemoteID == remoteID) {
			return true
		}
	}
	return false
}

// initialContact drops, without a delete (the peer forgot them), every
// IKE SA other than from between the same identities, and their
// children: the peer restarted.
func (m *Manager) initialContact(from *ikeSA, peer string, now time.Time) {
	for _, x := range m.sas {
		if x == from || x.ended || x.sa.PeerID() != peer || x.conn.ec.LocalID != from.conn.ec.LocalID {
			continue
		}
		if x.sa.State() != ike.StateEstablished {
			continue
		}
		m.log.WithFields(x.fields()).Info("ike: the peer restarted (INITIAL_CONTACT): dropping its old IKE SA")
		x.rekeyed = true // no dpd_action or retry follows
		m.down(x, now)
	}
}
