package ikenode

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/ike/keys"
	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/ike/proposal"
	"github.com/ipsecd/ipsecd/node"
	"github.com/ipsecd/ipsecd/sa"
)

// installed is a child whose SAs are in the node: their ids and the
// child's timers. What to install and when is the engine's to say
// (EventChildUp, EventChildOutbound, EventChildDown).
type installed struct {
	owner   *ikeSA
	in, out node.StateID
	// outbound: the outbound SA is in the node (EventChildUp without
	// InboundOnly, or EventChildOutbound since); the child was reported
	// up or rekeyed then.
	outbound bool
	at       time.Time
	// rekeyAt and lifeAt: rekey_time with jitter, and life_time.
	rekeyAt, lifeAt time.Time
	// peer is where the outbound SA sends, for ESP in UDP: the IKE SA's
	// peer when the child was made, or where followPeer moved it.
	peer netip.AddrPort
	// why is the reason of its end when we delete it: its child_down
	// event's Reason; empty when the peer deletes it.
	why string
	// routes are the routes it holds (routes.go).
	routes []routeKey
}

// childUp installs child c of x as the engine says: both SAs, or the
// inbound SA alone (inboundOnly) while the peer may not have the child
// yet (it rekeyed; EventChildOutbound follows) or the child is
// redundant. The keys the node has copies of are cleared; an outbound
// SA that waits keeps its keys in c until then.
func (m *Daemon) childUp(x *ikeSA, c *ike.Child, inboundOnly bool, now time.Time) {
	m.keylog.logESP(c)
	in, err := saConfig(c, x.conn, sa.DirIn)
	var out sa.Config
	if err == nil {
		if out, err = saConfig(c, x.conn, sa.DirOut); err != nil {
			in.ClearKeys()
		}
	}
	if err != nil {
		m.installFailed(x, c, err)
		return
	}
	rec := &installed{owner: x, in: idOf(&in), out: idOf(&out), at: now, peer: peerOf(&out)}
	if inboundOnly {
		out.ClearKeys() // c keeps its outbound keys until EventChildOutbound
		if err = m.cfg.Node.AddState(node.OwnerIKE, in); err == nil {
			m.cfg.Node.ReleaseSPI(c.InSPI) // installed: no longer a reservation
		}
		clear(c.In.Enc)
		clear(c.In.Integ)
		if c.Redundant {
			c.Clear() // its outbound SA never goes in
		}
	} else {
		err = m.cfg.Node.InstallChild(node.OwnerIKE, in, out)
		rec.outbound = err == nil
		c.Clear() // the node has copies
	}
	if err != nil {
		m.installFailed(x, c, err)
		return
	}
	if rt := x.conn.childOf(c).RekeyTime; rt > 0 {
		rec.rekeyAt = now.Add(jitter(rt))
	}
	if lt := x.conn.childOf(c).LifeTime; lt > 0 {
		rec.lifeAt = now.Add(lt)
	}
	m.children[c] = rec
	m.routeChild(x, c, rec) // routes.go
	m.ctr.childrenInstalled.Add(1)
	m.log.WithFields(x.fields()).WithField("child", c.Name).WithFields(map[string]any{"spi_in": fmt.Sprintf("%#x", c.InSPI), "spi_out": fmt.Sprintf("%#x", c.OutSPI),
		"suite": c.Suite.String(), "local_ts": tsStrings(c.LocalTS), "remote_ts": tsStrings(c.RemoteTS), "encap": c.Encap, "rekey": c.Replaces != nil,
		"outbound": rec.outbound}).Info("ike: child installed")
	if rec.outbound {
		m.announce(x, c)
	}
}

// installFailed reports child c of x, which could not be installed, and
// has the engine delete it with the peer.
func (m *Daemon) installFailed(x *ikeSA, c *ike.Child, err error) {
	m.log.WithFields(x.fields()).WithField("child", c.Name).WithError(err).Error("ike: installing the child failed: deleting it with the peer")
	m.cfg.Node.ReleaseSPI(c.InSPI)
	c.Clear()
	x.failed = append(x.failed, c)
	m.childFailed(x, c, err)
}

// announce reports child c of x, whose outbound SA went in: up, or
// rekeyed (by whom the engine says).
func (m *Daemon) announce(x *ikeSA, c *ike.Child) {
	if c.Replaces == nil {
		m.emit(childEvent(EventChildUp, x, c))
		return
	}
	ev := childEvent(EventChildRekeyed, x, c)
	ev.OldSPIIn, ev.OldSPIOut = fmt.Sprintf("%#x", c.Replaces.InSPI), fmt.Sprintf("%#x", c.Replaces.OutSPI)
	ev.Reason = ReasonRekeyedByPeer
	if c.Replaces.RekeyedBy() == ike.SideUs {
		ev.Reason = ReasonRekeyedByUs
	}
	m.emit(ev)
}

// childFailed reports child c of x, which the node refused to install.
func (m *Daemon) childFailed(x *ikeSA, c *ike.Child, err error) {
	ev := childEvent(EventChildFailed, x, c)
	ev.Reason, ev.Error = ReasonInstallFailed, errText(err)
	m.emit(ev)
}

// childOutbound installs the outbound SA of child c, whose inbound SA
// went in alone: the engine says the peer has the child now (it deletes
// the one c replaces, whose removal follows in the same step).
func (m *Daemon) childOutbound(c *ike.Child) {
	rec := m.children[c]
	if rec == nil {
		return
	}
	out, err := saConfig(c, rec.owner.conn, sa.DirOut)
	c.Clear()
	if err == nil {
		cfgPeer := peerOf(&out)
		err = m.cfg.Node.AddState(node.OwnerIKE, out)
		if err == nil && rec.peer != cfgPeer {
			// The peer moved while the outbound SA waited.
			err = m.cfg.Node.SetPeer(node.OwnerIKE, rec.out, rec.peer)
		}
	}
	if err != nil {
		m.log.WithError(err).Error("ike: installing the rekeyed child's outbound SA failed: deleting it with the peer")
		rec.outbound = true // whatever of it went in goes
		m.removeChild(c, rec, 0)
		rec.owner.failed = append(rec.owner.failed, c)
		return
	}
	rec.outbound = true
	m.announce(rec.owner, c)
}

// childDown removes child c, which the peer or we deleted.
func (m *Daemon) childDown(c *ike.Child) {
	old := m.children[c]
	if old == nil {
		return
	}
	m.removeChild(c, old, m.lingerFor(c))
	if old.outbound && c.RekeyedBy() == ike.SideNone {
		// Not replaced (child_rekeyed said so), nor redundant or
		// never carrying our traffic (nothing announced it).
		ev := childEvent(EventChildDown, old.owner, c)
		why := old.why
		if x := old.owner; x.sa.State() != ike.StateEstablished {
			why = cmp.Or(why, x.why) // the IKE SA's delete takes its children
		}
		ev.Reason = cmp.Or(why, ReasonDeletedByPeer)
		m.emit(ev)
	}
}

// removeChild takes c's SAs out of the node; with linger, the inbound SA
// only after that long (lingering), for the peer's packets still on the
// way: a delete that ends a child may arrive before the ESP the peer sent
// just before it, when the two come over different sockets (IKE on port
// 500, raw ESP). An SA already gone (its hard lifetime removed it) is no
// error. c's keys that an outbound SA waiting kept are cleared.
func (m *Daemon) removeChild(c *ike.Child, rec *installed, linger time.Duration) {
	delete(m.children, c)
	m.unrouteChild(rec) // routes.go
	m.childGone(rec)    // accounting.go
	c.Clear()
	var ids []node.StateID
	if rec.outbound {
		ids = append(ids, rec.out)
	}
	if linger > 0 {
		m.lingering = append(m.lingering, lingering{rec.in, m.clock.Now().Add(linger)})
	} else {
		ids = append(ids, rec.in)
	}
	m.removeStates(ids...)
	m.ctr.childrenRemoved.Add(1)
}

func (m *Daemon) removeStates(ids ...node.StateID) {
	for _, id := range ids {
		if err := m.cfg.Node.RemoveStates(node.OwnerIKE, id); err != nil && !errors.Is(err, sa.ErrNotFound) {
			m.log.WithError(err).WithField("state", id).Warn("ike: removing a child's SA")
		}
	}
}

// DefaultLinger is how long the inbound SA of a rekeyed child stays
// after its delete: packets the peer sent on it before it switched to
// the new SA are still opened, with the old SA's selectors and replay
// window. It is strongSwan's delete_rekeyed_delay (5 s): a peer on a
// loaded machine may send them late (charon's socket was seen holding
// datagrams for over a second while it was stalled), and a stall of our
// own may leave them in the underlay's queue while the timer runs.
const DefaultLinger = 5 * time.Second

// deletedLinger bounds the linger of a child deleted without a
// replacement: its traffic ends with it, so only what crossed the
// delete on the wire needs opening.
const deletedLinger = 2 * time.Second

// lingerFor is how long c's inbound SA stays once c is deleted.
func (m *Daemon) lingerFor(c *ike.Child) time.Duration {
	if c.RekeyedBy() != ike.SideNone {
		return m.linger
	}
	return min(m.linger, deletedLinger)
}

// lingering is an inbound SA to remove at a time.
type lingering struct {
	id node.StateID
	at time.Time
}

// removeLingering removes the lingering SAs due by now (all with a zero
// now).
func (m *Daemon) removeLingering(now time.Time) {
	keep := m.lingering[:0]
	for _, l := range m.lingering {
		if now.IsZero() || !now.Before(l.at) {
			m.removeStates(l.id)
			continue
		}
		keep = append(keep, l)
	}
	m.lingering = keep
}

func idOf(c *sa.Config) node.StateID { return node.StateID{Dir: c.Dir, SPI: c.SPI, Dst: c.Dst} }

// saConfig returns c's SA of direction dir, with copies of its keys.
func saConfig(c *ike.Child, cn *conn, dir sa.Dir) (sa.Config, error) {
	ch := cn.childOf(c)
	mode := sa.ModeTunnel
	if c.Transport {
		mode = sa.ModeTransport
	}
	local, remote := c.Local, c.Remote
	selIn, selOut, err := selectorsOf(c.LocalTS, c.RemoteTS)
	if err != nil {
		return sa.Config{}, err
	}
	s := sa.Config{Src: local.Addr(), Dst: remote.Addr(), SPI: c.OutSPI, Dir: dir, Mode: mode, IfID: ch.IfID, ESN: c.ESN, Selector: selOut}
	keys := c.Out
	if dir == sa.DirIn {
		s.Src, s.Dst, s.SPI, s.Selector, s.ReplayWindow = remote.Addr(), local.Addr(), c.InSPI, selIn, ch.ReplayWindow
		keys = c.In
	}
	if lt := ch.LifeTime; lt > 0 {
		// The data path stops the pair at life_time even if IKE could
		// not delete it; a little later than our own delete.
		s.Lifetime.HardAdd = lt + 10*time.Second
	}
	if c.Encap {
		s.Encap = &sa.Encap{SrcPort: local.Port(), DstPort: remote.Port()}
		if dir == sa.DirIn {
			s.Encap = &sa.Encap{SrcPort: remote.Port(), DstPort: local.Port()}
		}
	}
	if err := setAlgorithms(&s, c.Suite, keys); err != nil {
		return sa.Config{}, err
	}
	return s, nil
}

// setAlgorithms fills the transforms of s for suite with copies of k,
// as sa's table of algorithms says (proposal.Alg.ESP: the table that
// the proposals were parsed and chosen by; docs/ike.md, "From a Child to
// the SAD").
func setAlgorithms(s *sa.Config, suite proposal.Suite, k keys.ESPKeys) error {
	enc, et, ok := suite.Encr.ESP()
	if !ok || len(k.Enc) != et.KeyBytes {
		return fmt.Errorf("ESP encryption %q cannot be installed", suite.Encr.Name)
	}
	if enc.Kind == sa.KindAEAD {
		s.AEAD = &sa.Algorithm{Name: enc.Name, Key: slices.Clone(k.Enc), Bits: et.Bits}
		return nil
	}
	auth, at, ok := suite.Integ.ESP()
	if !ok || len(k.Integ) != at.KeyBytes {
		return fmt.Errorf("ESP integrity %q cannot be installed", suite.Integ.Name)
	}
	s.Enc = &sa.Algorithm{Name: enc.Name, Key: slices.Clone(k.Enc)}
	s.Auth = &sa.Algorithm{Name: auth.Name, Key: slices.Clone(k.Integ), Bits: at.Bits}
	return nil
}

// selectorsOf is where negotiated traffic selectors become SAD
// selectors, the one place: the outbound SA's from ours (local) to the
// peer's, the inbound SA's the reverse. They are exactly the negotiated
// sets, every range, protocol and port range of either family
// (sa.NewSelector: a prefix pair when each side is one prefix of any
// protocol and port). An error means a selector the SAD cannot hold
// exactly, and the child is not installed: never a wider selector.
func selectorsOf(local, remote []message.Selector) (in, out sa.Selector, err error) {
	out, err = sa.NewSelector(ike.SATS(local), ike.SATS(remote))
	if err != nil {
		return in, out, fmt.Errorf("negotiated traffic selectors (src: ours, dst: the peer's): %w", err)
	}
	return out.Reverse(), out, nil
}
