package ikenode

import (
	"slices"
	"time"

	"github.com/ipsecd/ipsecd/ike"
)

// reestablish replaces an IKE SA that cannot be rekeyed (one with
// additional key exchanges: ike.ErrFollowupKE) by a new one: it is
// deleted, and the connection initiated again with its children, break
// before make, so that the new children's selectors meet no old ones.
// A connection that cannot initiate (no remote_addrs) lets it expire.
func (m *Daemon) reestablish(x *ikeSA, now time.Time) {
	c := x.conn
	if len(c.cfg.RemoteAddrs) == 0 {
		m.log.WithFields(x.fields()).Warnf("%v: the IKE SA expires in %v", ike.ErrFollowupKE, x.expireAt.Sub(now).Round(time.Second))
		return
	}
	var names []string
	for _, ch := range x.sa.Children() {
		if !ch.Redundant && !slices.Contains(names, ch.Name) {
			names = append(names, ch.Name)
		}
	}
	m.log.WithFields(x.fields()).Infof("ike: rekey_time of an IKE SA with additional key exchanges: deleting it and initiating anew (%v)", ike.ErrFollowupKE)
	x.why = ReasonReestablished
	m.deleteSA(x, now)
	if err := m.initiate(c, names, now); err != nil {
		m.log.WithError(err).WithField("connection", c.cfg.Name).Warn("ike: initiate failed")
		m.retryLater(c, names, now)
	}
}
