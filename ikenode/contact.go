package ikenode

import (
	"time"

	"github.com/ipsecd/ipsecd/ike"
)

// INITIAL_CONTACT (RFC 7296 §2.4): the engine asks hasContact
// (ike.Config.HasContact) whether to send it, and reports the peer's as
// ike.EventInitialContact, which event hands to initialContact.

// hasContact reports whether an established IKE SA between the
// identities is up: when none is, our IKE_AUTH carries INITIAL_CONTACT
// and the peer drops what it kept of our previous life. Called by the
// engine from inside HandleFrom, in the Run goroutine, while it builds
// the IKE_AUTH request of an SA that is itself in m.sas, not yet
// established: counting SAs on their way would count that one, and
// INITIAL_CONTACT would never be sent.
func (m *Manager) hasContact(localID, remoteID string) bool {
	for _, x := range m.sas {
		if x.ended || x.rekeyed || x.conn.ec.LocalID != localID || x.sa.State() != ike.StateEstablished {
			continue
		}
		if x.sa.PeerID() == remoteID {
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
		x.dropped = true
		m.down(x, now)
	}
}
