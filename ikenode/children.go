package ikenode

import (
	"time"

	"github.com/ipsecd/ipsecd/ike"
)

// Several children per connection: each child of the config is brought
// up, rekeyed, deleted and listed on its own, all under the
// connection's one IKE SA. The first goes in IKE_AUTH; the others, and
// those the commands or traffic ask for later, are created with
// CREATE_CHILD_SA. Our requests go one at a time (RFC 7296 §2.3, a
// window of one): what is asked while an exchange is outstanding, or
// before the IKE SA is up, waits in the engine's queue, and next sends
// it once the SA is idle.

// next sends the request of ours that waits in x's queue, once x is up
// and idle: a child's creation, rekey or delete, an IKE rekey, a
// liveness check, or x's delete.
func (m *Daemon) next(x *ikeSA, now time.Time) {
	if x.ended || x.rekeyed {
		return
	}
	out, err := x.sa.Next(now)
	if err != nil {
		m.log.WithError(err).WithFields(x.fields()).Warn("ike: queued exchange not started")
	}
	if out == nil {
		return
	}
	if name := x.sa.CreatingNow(); name != "" {
		m.log.WithFields(x.fields()).WithField("child", name).Info("ike: creating child")
	}
	m.request(x, out)
	m.afterCall(x, now) // a queued delete ends x
}

// hasChild reports whether x holds a child of the name, or has its
// creation under way (in IKE_AUTH, or a CREATE_CHILD_SA of ours) or
// queued.
func (m *Daemon) hasChild(x *ikeSA, name string) bool {
	for _, c := range x.sa.Children() {
		if c.Name == name && !c.Redundant {
			return true
		}
	}
	if x.sa.State() != ike.StateEstablished && x.first == name {
		return true
	}
	return x.sa.Creating(name)
}

// bringUp brings up c's children of the names under its live IKE SA x,
// or under a new IKE SA when x is nil.
func (m *Daemon) bringUp(c *conn, x *ikeSA, names []string, now time.Time) error {
	if x == nil {
		return m.initiate(c, names, now)
	}
	for _, name := range names {
		if m.hasChild(x, name) {
			continue
		}
		out, err := x.sa.CreateChild(name, now)
		if err != nil {
			m.log.WithError(err).WithFields(x.fields()).WithField("child", name).Warn("ike: child exchange not started")
			continue
		}
		if out != nil {
			m.log.WithFields(x.fields()).WithField("child", name).Info("ike: creating child")
			m.request(x, out)
		}
	}
	return nil
}
