package ikenode

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/sa"
)

// Backoff of start_action start after a failed attempt: 5 s, doubling, at
// most 5 minutes.
const (
	retryFirst = 5 * time.Second
	retryMax   = 5 * time.Minute
)

// conn is one connection of the config with its children (cfg.Children):
// the first that start_action (or the command) brings up goes in
// IKE_AUTH, the others follow with CREATE_CHILD_SA (ikeSA.todo); the
// responder gives each child the config its selectors meet (the engine's
// Config.Children).
type conn struct {
	cfg config.Connection
	ec  *ike.Config // PSK copied; cleared when the connection goes
	// ecFor is ec with each child as the one IKE_AUTH proposes, by name
	// (ec itself for the first): they share ec's PSK.
	ecFor map[string]*ike.Config
	// ike is the ike: section c was made with (engineSettings), which
	// same compares on reload beside cfg.
	ike config.IKE
	// retryAt is when start_action start (or dpd_action restart) tries
	// again, with the children retry (zero: not
	// waiting); backoff the wait after the next failure.
	retryAt time.Time
	retry   []string
	backoff time.Duration
	// trapped: the children whose trap policies are in (policies,
	// those we added).
	trapped  map[string]bool
	policies []sa.Policy
}

// child returns c's child named name, or nil.
func (c *conn) child(name string) *config.Child {
	for i := range c.cfg.Children {
		if c.cfg.Children[i].Name == name {
			return &c.cfg.Children[i]
		}
	}
	return nil
}

// childOf returns the config of negotiated child ch: the child of its
// name, or (for a child made without one) the first.
func (c *conn) childOf(ch *ike.Child) *config.Child {
	if cc := c.child(ch.Name); cc != nil {
		return cc
	}
	return &c.cfg.Children[0]
}

// childrenStarting returns the names of c's children whose start_action
// is a, in file order.
func (c *conn) childrenStarting(a config.StartAction) []string {
	var names []string
	for _, ch := range c.cfg.Children {
		if ch.StartAction == a {
			names = append(names, ch.Name)
		}
	}
	return names
}

// childrenOnDPD returns the names of c's children whose dpd_action is a,
// in file order.
func (c *conn) childrenOnDPD(a config.DPDAction) []string {
	var names []string
	for _, ch := range c.cfg.Children {
		if ch.DPDAction == a {
			names = append(names, ch.Name)
		}
	}
	return names
}

// childNames returns the names of all c's children.
func (c *conn) childNames() []string {
	var names []string
	for _, ch := range c.cfg.Children {
		names = append(names, ch.Name)
	}
	return names
}

// setConnections makes m's connections from ic (New, Reload).
func (m *Daemon) setConnections(ic *config.IKEConfig, now time.Time) {
	for _, c := range m.connsFrom(ic, nil) {
		m.conns[c.cfg.Name] = c
		m.connOrder = append(m.connOrder, c.cfg.Name)
	}
}

// connsFrom builds the connections of ic, in file order: those only
// names, or all when only is nil.
func (m *Daemon) connsFrom(ic *config.IKEConfig, only map[string]bool) []*conn {
	m.storePoolAttrs(ic) // vips.go: for the connections kept too
	var out []*conn
	settings := engineSettings(ic.IKE)
	for i := range ic.Connections {
		cn := ic.Connections[i]
		if len(cn.Children) == 0 || (only != nil && !only[cn.Name]) {
			continue
		}
		ch := cn.Children[0]
		ec := ic.EngineConfigOf(&cn, &cn.Children[0], m.eapSecret)
		if !m.cfg.RawESP && !ec.ForceEncap {
			// Raw ESP could not be carried: make NAT detection report a
			// NAT so that both sides put ESP in UDP.
			ec.ForceEncap = true
		}
		ec.AllocSPI = m.cfg.Node.AllocSPI // the engine says which went unused (EventSPIUnused)
		ec.HasContact = m.hasContact
		if cn.Unique == config.UniqueNever {
			// swanctl's unique = never sends no INITIAL_CONTACT: say
			// we always hold one.
			ec.HasContact = func(ike.Identity, ike.Identity) bool { return true }
		}
		ec.Admit = m.admit // unique: keep and replace (unique.go)
		ec.VirtualIPs = m.vipsFor(&cn)
		if cn.Remote.Auth == ike.AuthEAPRADIUS {
			if m.cfg.RADIUS == nil {
				m.log.WithField("connection", cn.Name).Error("ike: connection skipped: remote auth eap-radius, and no RADIUS client (eap_radius:)")
				continue
			}
			ec.EAPRelay = m.eapRelay
		}
		c := &conn{cfg: cn, ec: ec, ecFor: map[string]*ike.Config{ch.Name: ec}, trapped: map[string]bool{}, ike: settings}
		for _, ch := range cn.Children {
			if !m.cfg.Trap && (ch.StartAction == config.StartActionTrap || ch.DPDAction == config.DPDActionTrap) {
				m.log.WithField("child", ch.Name).Warn("ike: trap (start_action or dpd_action) is not supported by this build: the child is not brought up on traffic; start_action trap acts as none, dpd_action trap as clear")
			}
			if c.ecFor[ch.Name] == nil {
				other := *ec
				other.Child = *ec.ChildConfig(ch.Name)
				c.ecFor[ch.Name] = &other
			}
		}
		out = append(out, c)
	}
	return out
}

// admits reports whether c serves a peer at remote talking to local.
func (c *conn) admits(local, remote netip.Addr) bool {
	if len(c.cfg.LocalAddrs) > 0 && !slices.Contains(c.cfg.LocalAddrs, local) {
		return false
	}
	return c.cfg.RemoteAny || len(c.cfg.RemoteAddrs) == 0 || slices.Contains(c.cfg.RemoteAddrs, remote)
}

// startConn traps c's children of start_action trap and initiates those
// of start_action start, at start-up or reload.
func (m *Daemon) startConn(c *conn, now time.Time) {
	for _, name := range c.childrenStarting(config.StartActionTrap) {
		m.trap(c, name)
	}
	start := c.childrenStarting(config.StartActionStart)
	if len(start) == 0 {
		return
	}
	if err := m.initiate(c, start, now); err != nil {
		m.log.WithError(err).WithField("connection", c.cfg.Name).Warn("ike: initiate failed")
		m.retryLater(c, start, now)
	}
}

// retryLater schedules c's next attempt with children, with backoff.
func (m *Daemon) retryLater(c *conn, children []string, now time.Time) {
	c.retry = children
	c.backoff = min(max(2*c.backoff, retryFirst), retryMax)
	c.retryAt = now.Add(c.backoff)
	m.log.WithField("connection", c.cfg.Name).Infof("ike: retrying in %v", c.backoff)
}

// initiate starts an IKE SA for c towards the first of its remote_addrs,
// with children (names of c's): the first in IKE_AUTH, the others by
// CREATE_CHILD_SA once the IKE SA is up, one at a time.
func (m *Daemon) initiate(c *conn, children []string, now time.Time) error {
	if len(c.cfg.RemoteAddrs) == 0 {
		return fmt.Errorf("remote_addrs has no address to initiate to")
	}
	remote := netip.AddrPortFrom(c.cfg.RemoteAddrs[0], m.peerPort)
	var local netip.Addr
	for _, a := range c.cfg.LocalAddrs {
		if a.Is4() == remote.Addr().Is4() {
			local = a
			break
		}
	}
	if !local.IsValid() {
		var err error
		if local, err = localFor(remote.Addr()); err != nil {
			return err
		}
	}
	ec := c.ec
	if len(children) > 0 && c.ecFor[children[0]] != nil {
		ec = c.ecFor[children[0]]
	}
	s, msg, err := ike.Initiate(ec, netip.AddrPortFrom(local, m.Port()), remote, now)
	if err != nil {
		return err
	}
	c.retryAt = time.Time{}
	x := m.add(s, c, now)
	x.first = ec.Child.Name
	for _, name := range children[min(1, len(children)):] {
		x.sa.CreateChild(name, now) // queued until IKE_AUTH is done
	}
	m.log.WithFields(x.fields()).Info("ike: initiating")
	m.request(x, msg)
	return nil
}

// jitter returns d less a random part of its last tenth, as strongSwan
// subtracts rand_time (default: over_time, 10% of the rekey time) so
// that both sides rarely rekey at once.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return d - rand.N(d/10+1)
}
