package ikenode

import (
	"cmp"
	"slices"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/config"
)

// limits are the ike: section's bounds on what peers make the daemon
// hold; 0 means no limit. The children per IKE SA are the engine's
// (ike.Config.MaxChildren).
type limits struct {
	// BlockThreshold and InitLimitHalfOpen bound the half-open
	// responder SAs from one address and in all (saIndex).
	BlockThreshold, InitLimitHalfOpen int
	// MaxIKESAsPerPeer bounds the established IKE SAs of one connection
	// with one peer identity (limitPeer).
	MaxIKESAsPerPeer int
}

func limitsOf(i config.IKE) limits {
	return limits{BlockThreshold: i.BlockThreshold, InitLimitHalfOpen: i.InitLimitHalfOpen, MaxIKESAsPerPeer: i.MaxIKESAsPerPeer}
}

// limitPeer keeps the IKE SAs of x's connection with x's peer identity
// within ike.max_ike_sas_per_peer, now that x is up (by IKE_AUTH or a
// rekey): past it, the others go, those that hold no child first (an SA
// a rekey replaced), then the oldest. Without this, an authenticated
// peer that keeps making IKE SAs (new ones, or rekeys it never deletes
// the old SA of) makes the daemon hold ever more.
func (m *Daemon) limitPeer(x *ikeSA, now time.Time) {
	limit := m.limits.MaxIKESAsPerPeer
	if limit <= 0 {
		return
	}
	peer := x.sa.PeerID()
	var others []*ikeSA
	for _, y := range m.sas {
		if samePeer(x, y) {
			others = append(others, y)
		}
	}
	if len(others) < limit {
		return
	}
	slices.SortStableFunc(others, func(a, b *ikeSA) int {
		if c := cmp.Compare(len(a.sa.Children()), len(b.sa.Children())); c != 0 {
			return c
		}
		return a.up.Compare(b.up)
	})
	for _, y := range others[:len(others)-limit+1] {
		m.log.WithFields(y.fields()).WithFields(logrus.Fields{"peer_id": peer.String(), "limit": limit}).
			Warn("ike: more IKE SAs with this peer than ike.max_ike_sas_per_peer: deleting the oldest")
		y.rekeyed, y.dropped = true, true // no dpd_action or retry follows; listed DELETING
		y.why = ReasonLimit
		if !y.sa.Busy() {
			if out, err := y.sa.Delete(now); err == nil {
				m.request(y, out)
				m.afterCall(y, now)
				continue
			}
		}
		// An exchange of its own is under way: dropped without a
		// delete, as INITIAL_CONTACT drops an SA.
		m.down(y, now)
	}
}
