package ikenode

import (
	"errors"
	"net/netip"
	"slices"
	"time"

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
func (m *Manager) Acquire(ifID uint32, src, dst netip.Addr) {
	select {
	case m.acquires <- acquire{ifID, src, dst}:
	default:
		m.ctr.queueDrops.Add(1)
	}
}

// onAcquire initiates the trap connection whose policy the packet
// matched, unless it is up or on its way.
func (m *Manager) onAcquire(a acquire, now time.Time) {
	for _, name := range m.connOrder {
		c := m.conns[name]
		if !c.trapped || c.child.IfID != a.ifID || !c.coversTraffic(a.src, a.dst) || m.liveSA(c) != nil {
			continue
		}
		m.log.WithField("connection", c.cfg.Name).WithField("src", a.src).WithField("dst", a.dst).Info("ike: traffic for a trapped child: initiating")
		if err := m.initiate(c, now); err != nil {
			m.log.WithError(err).WithField("connection", c.cfg.Name).Warn("ike: initiate failed")
		}
		return
	}
}

// coversTraffic reports whether c's child selectors hold a packet from
// src to dst.
func (c *conn) coversTraffic(src, dst netip.Addr) bool {
	return slices.ContainsFunc(c.child.LocalTS, func(p netip.Prefix) bool { return p.Contains(src) }) &&
		slices.ContainsFunc(c.child.RemoteTS, func(p netip.Prefix) bool { return p.Contains(dst) })
}

// trapPolicies are c's allow out policies: one per pair of its local and
// remote selectors of one family.
func (c *conn) trapPolicies() []sa.Policy {
	var ps []sa.Policy
	for _, l := range c.child.LocalTS {
		for _, r := range c.child.RemoteTS {
			if l.Addr().Is4() == r.Addr().Is4() {
				ps = append(ps, sa.Policy{Dir: sa.DirOut, IfID: c.child.IfID, Selector: sa.Selector{Src: l, Dst: r}, Action: sa.ActionAllow})
			}
		}
	}
	return ps
}

// trap installs c's trap policies (start_action trap at load, dpd_action
// trap after a dead peer). A policy that exists already (another
// connection's, or the file's) is left as it is.
func (m *Manager) trap(c *conn) {
	if !m.cfg.Trap || c.trapped {
		return
	}
	c.trapped = true
	for _, p := range c.trapPolicies() {
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

// untrap removes the trap policies of c (it goes, or changed).
func (m *Manager) untrap(c *conn) {
	for _, p := range c.policies {
		if err := m.cfg.Node.DeletePolicy(p); err != nil && !errors.Is(err, sa.ErrNotFound) {
			m.log.WithError(err).WithField("connection", c.cfg.Name).Warn("ike: removing the trap policy")
		}
	}
	c.policies, c.trapped = nil, false
}
