package ikenode

import (
	"errors"
	"net/netip"
	"slices"
	"time"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/node"
	"github.com/ipsecd/ipsecd/sa"
)

// start_action trap and dpd_action trap (swanctl's): an allow out policy
// for the child's selectors stands in the SAD with no SA behind it, and
// the first packet it lets through is an acquire (sa.Acquire, raised by
// the data path, handed over by Acquire) that initiates the connection.
// It needs a node that raises acquires: Config.Trap says it does.
// Without, trap acts as none (start_action) and clear (dpd_action), with
// a warning at load.

// acquire is one packet the data path found a trap policy for.
type acquire struct {
	ifID     uint32
	src, dst netip.Addr
}

// acquireSize bounds the acquires waiting for the IKE goroutine; the data
// path raises at most one per policy per second.
const acquireSize = 64

// Acquire reports a packet from src to dst routed into the interface of
// ifID that an out policy let through and no SA serves. It never blocks
// (it is called on the data path): when the queue is full the acquire is
// dropped and counted; the next packet raises another.
func (m *Daemon) Acquire(ifID uint32, src, dst netip.Addr) {
	select {
	case m.acquires <- acquire{ifID, src, dst}:
	default:
		m.ctr.queueDrops.Add(1)
	}
}

// onAcquire brings up the trapped child whose policy the packet matched:
// under its connection's IKE SA when that is up or on its way, else with
// a new one; nothing when the child is up or on its way.
func (m *Daemon) onAcquire(a acquire, now time.Time) {
	for _, name := range m.connOrder {
		c := m.conns[name]
		for i := range c.cfg.Children {
			ch := &c.cfg.Children[i]
			if !c.trapped[ch.Name] || ch.IfID != a.ifID || !coversTraffic(ch, a.src, a.dst) {
				continue
			}
			x := m.liveSA(c)
			if x != nil && m.hasChild(x, ch.Name) {
				return
			}
			m.log.WithFields(map[string]any{"connection": c.cfg.Name, "child": ch.Name, "src": a.src, "dst": a.dst}).Info("ike: traffic for a trapped child: initiating")
			if err := m.bringUp(c, x, []string{ch.Name}, now); err != nil {
				m.log.WithError(err).WithField("connection", c.cfg.Name).Warn("ike: initiate failed")
			}
			return
		}
	}
}

// coversTraffic reports whether ch's selectors hold a packet from src to
// dst.
func coversTraffic(ch *config.Child, src, dst netip.Addr) bool {
	return slices.ContainsFunc(ch.LocalTS, func(p netip.Prefix) bool { return p.Contains(src) }) &&
		slices.ContainsFunc(ch.RemoteTS, func(p netip.Prefix) bool { return p.Contains(dst) })
}

// trapPolicies are ch's allow out policies: one per pair of its local
// and remote selectors of one family.
func trapPolicies(ch *config.Child) []sa.Policy {
	var ps []sa.Policy
	for _, l := range ch.LocalTS {
		for _, r := range ch.RemoteTS {
			if l.Addr().Is4() == r.Addr().Is4() {
				ps = append(ps, sa.Policy{Dir: sa.DirOut, IfID: ch.IfID, Selector: sa.Selector{Src: l, Dst: r}, Action: sa.ActionAllow})
			}
		}
	}
	return ps
}

// trap installs the trap policies of c's child named name (start_action
// trap at load, dpd_action trap after a dead peer). A policy that exists
// already (another child's, or the file's) is left as it is.
func (m *Daemon) trap(c *conn, name string) {
	ch := c.child(name)
	if !m.cfg.Trap || ch == nil || c.trapped[name] {
		return
	}
	c.trapped[name] = true
	for _, p := range trapPolicies(ch) {
		err := m.cfg.Node.AddPolicy(node.OwnerIKE, p)
		switch {
		case err == nil:
			c.policies = append(c.policies, p)
		case errors.Is(err, sa.ErrExists):
		default:
			m.log.WithError(err).WithField("connection", c.cfg.Name).Error("ike: installing the trap policy")
		}
	}
}

// untrap removes the trap policies of c's children (it goes, or
// changed).
func (m *Daemon) untrap(c *conn) {
	for _, p := range c.policies {
		if err := m.cfg.Node.DeletePolicy(p); err != nil && !errors.Is(err, sa.ErrNotFound) {
			m.log.WithError(err).WithField("connection", c.cfg.Name).Warn("ike: removing the trap policy")
		}
	}
	c.policies = nil
	clear(c.trapped)
}
