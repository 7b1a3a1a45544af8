package ikenode

import (
	"errors"
	"time"

	"github.com/ipsecd/ipsecd/ike"
)

// Several children per connection: each child of the config is brought
// up, rekeyed, deleted and listed on its own, all under the
// connection's one IKE SA. The first goes in IKE_AUTH; the others, and
// those the commands or traffic ask for later, are created with
// CREATE_CHILD_SA. Our requests go one at a time (RFC 7296 §2.3, a
// window of one): what is asked while an exchange is outstanding waits
// in the IKE SA's todo, and runTodo sends it once the SA is idle.

// childOp is one child exchange waiting for its turn: the creation of
// the child named name, or (del set) the delete of del.
type childOp struct {
	name string
	del  *ike.Child
}

// runTodo starts x's next waiting child exchange when x is up and no
// exchange of ours is outstanding. A create of a child that is up
// meanwhile, or a delete of one that is gone, is dropped.
func (m *Daemon) runTodo(x *ikeSA, now time.Time) {
	for len(x.todo) > 0 && !x.ended && !x.rekeyed && x.sa.State() == ike.StateEstablished && !x.sa.Busy() {
		op := x.todo[0]
		x.todo = x.todo[1:]
		var out []byte
		var err error
		if op.del != nil {
			out, err = x.sa.DeleteChild(op.del, now)
			if rec := m.children[op.del]; rec != nil && err == nil {
				rec.why = ReasonTerminated
			}
		} else {
			if m.hasChild(x, op.name) {
				continue
			}
			out, err = x.sa.CreateChild(op.name, now)
		}
		if errors.Is(err, ike.ErrBusy) {
			x.todo = append([]childOp{op}, x.todo...)
			return
		}
		if err != nil {
			m.log.WithError(err).WithFields(x.fields()).WithField("child", op.name).Warn("ike: child exchange not started")
			continue
		}
		if op.del == nil {
			x.creating = op.name
			m.log.WithFields(x.fields()).WithField("child", op.name).Info("ike: creating child")
		}
		m.request(x, out)
		return
	}
}

// hasChild reports whether x holds a child of the name, or has its
// creation under way (in IKE_AUTH, or a CREATE_CHILD_SA of ours).
func (m *Daemon) hasChild(x *ikeSA, name string) bool {
	for _, c := range x.sa.Children() {
		if c.Name == name && !c.Redundant {
			return true
		}
	}
	if x.sa.State() != ike.StateEstablished {
		return x.first == name
	}
	return x.creating == name && x.sa.Busy()
}

// queued reports whether the creation of the child named name waits in
// x's todo.
func (x *ikeSA) queued(name string) bool {
	for _, op := range x.todo {
		if op.del == nil && op.name == name {
			return true
		}
	}
	return false
}

// bringUp brings up c's children of the names under its live IKE SA x,
// or under a new IKE SA when x is nil.
func (m *Daemon) bringUp(c *conn, x *ikeSA, names []string, now time.Time) error {
	if x == nil {
		return m.initiate(c, names, now)
	}
	for _, name := range names {
		if !m.hasChild(x, name) && !x.queued(name) {
			x.todo = append(x.todo, childOp{name: name})
		}
	}
	m.runTodo(x, now)
	return nil
}
