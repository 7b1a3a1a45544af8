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

// installed is a child whose SAs are in the node.
type installed struct {
	owner   *ikeSA
	in, out node.StateID
	// outPending: the outbound SA waits for the peer's delete of the
	// child this one replaces (we answered the peer's rekey); out holds
	// its config until then.
	outPending *sa.Config
	replaces   *ike.Child
	at         time.Time
	// rekeyAt and lifeAt: rekey_time with jitter, and life_time.
	rekeyAt, lifeAt time.Time
	// peer is where the outbound SA sends, for ESP in UDP: the IKE SA's
	// peer when the child was made, or where followPeer moved it.
	peer netip.AddrPort
	// why is the reason of its end when we delete it: its child_down
	// event's Reason; empty when the peer deletes it.
	why string
}

// childUp installs child c of x (make-before-break: see the package doc).
func (m *Daemon) childUp(x *ikeSA, c *ike.Child, now time.Time) {
	log := m.log.WithFields(x.fields()).WithField("child", c.Name)
	m.keylog.logESP(c)
	in, out, err := saConfigs(c, x.conn)
	if err != nil {
		c.Clear()
		log.WithError(err).Error("ike: child cannot be installed: deleting it with the peer")
		x.failed = append(x.failed, c)
		m.childFailed(x, c, err)
		return
	}
	ours := false
	if c.Replaces != nil {
		_, ours = x.rekeying[c.Replaces]
		delete(x.rekeying, c.Replaces)
	}
	rec := &installed{owner: x, in: idOf(&in), out: idOf(&out), replaces: c.Replaces, at: now}
	rec.peer = peerOf(&out)
	// The redundant child of simultaneous rekeys (§2.8.1), which the
	// engine deletes, takes the peer's packets until then, and carries
	// none of ours.
	if (c.Replaces != nil && !ours && m.children[c.Replaces] != nil) || c.Redundant {
		// The peer rekeys: our answer may not have reached it, so its
		// new inbound SA may not exist yet. Inbound now; outbound when
		// it deletes the old child.
		err = m.cfg.Node.AddState(node.OwnerIKE, in)
		m.cfg.Node.ReleaseSPI(c.InSPI)
		rec.outPending = &out
	} else {
		err = m.cfg.Node.InstallChild(node.OwnerIKE, in, out)
		out.ClearKeys()
	}
	delete(m.spis, c.InSPI)
	c.Clear() // the node and rec.outPending have copies
	if err != nil {
		if rec.outPending != nil {
			rec.outPending.ClearKeys()
		}
		log.WithError(err).Error("ike: installing the child failed: deleting it with the peer")
		x.failed = append(x.failed, c)
		m.childFailed(x, c, err)
		return
	}
	if rt := x.conn.childOf(c).RekeyTime; rt > 0 {
		rec.rekeyAt = now.Add(jitter(rt))
	}
	if lt := x.conn.childOf(c).LifeTime; lt > 0 {
		rec.lifeAt = now.Add(lt)
	}
	m.children[c] = rec
	m.ctr.childrenInstalled.Add(1)
	log.WithFields(map[string]any{"spi_in": fmt.Sprintf("%#x", c.InSPI), "spi_out": fmt.Sprintf("%#x", c.OutSPI),
		"suite": c.Suite.String(), "local_ts": tsStrings(c.LocalTS), "remote_ts": tsStrings(c.RemoteTS), "encap": c.Encap, "rekey": c.Replaces != nil}).Info("ike: child installed")
	switch {
	case c.Redundant:
		// The loser of simultaneous rekeys, deleted at once: the
		// winner's child_rekeyed reports the rekey.
	case c.Replaces != nil:
		ev := childEvent(EventChildRekeyed, x, c)
		ev.OldSPIIn, ev.OldSPIOut = fmt.Sprintf("%#x", c.Replaces.InSPI), fmt.Sprintf("%#x", c.Replaces.OutSPI)
		ev.Reason = ReasonRekeyedByPeer
		if ours {
			ev.Reason = ReasonRekeyedByUs
		}
		m.emit(ev)
	default:
		m.emit(childEvent(EventChildUp, x, c))
	}
}

// childFailed reports child c of x, which the node refused to install.
func (m *Daemon) childFailed(x *ikeSA, c *ike.Child, err error) {
	ev := childEvent(EventChildFailed, x, c)
	ev.Reason, ev.Error = ReasonInstallFailed, errText(err)
	m.emit(ev)
}

// childDown removes child c, which the peer or we deleted. A child whose
// replacement waits for this delete gets its outbound SA now, in the same
// step as the old pair goes.
func (m *Daemon) childDown(c *ike.Child) {
	old := m.children[c]
	for nc, rec := range m.children {
		if rec.replaces != c || rec.outPending == nil {
			continue
		}
		cfgPeer := peerOf(rec.outPending)
		err := m.cfg.Node.AddState(node.OwnerIKE, *rec.outPending)
		rec.outPending.ClearKeys()
		rec.outPending = nil
		if err == nil && rec.peer != cfgPeer {
			// The peer moved while the outbound SA waited.
			err = m.cfg.Node.SetPeer(node.OwnerIKE, rec.out, rec.peer)
		}
		if err != nil {
			m.log.WithError(err).Error("ike: installing the rekeyed child's outbound SA failed: deleting it with the peer")
			m.removeChild(nc, rec, 0)
			rec.owner.failed = append(rec.owner.failed, nc)
		}
	}
	if old == nil {
		return
	}
	m.removeChild(c, old, m.linger)
	for _, rec := range m.children {
		if rec.replaces == c {
			return // rekeyed: child_rekeyed said so
		}
	}
	if !c.Redundant {
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
// error.
func (m *Daemon) removeChild(c *ike.Child, rec *installed, linger time.Duration) {
	delete(m.children, c)
	var ids []node.StateID
	if rec.outPending == nil {
		ids = append(ids, rec.out)
	} else {
		rec.outPending.ClearKeys()
		rec.outPending = nil
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

// DefaultLinger is how long the inbound SA of a child the peer deleted
// stays: packets that left the peer before its delete are still opened.
const DefaultLinger = 2 * time.Second

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

// saConfigs returns the inbound and outbound SAs of c, with copies of its
// keys.
func saConfigs(c *ike.Child, cn *conn) (in, out sa.Config, err error) {
	ch := cn.childOf(c)
	mode := sa.ModeTunnel
	if c.Transport {
		mode = sa.ModeTransport
	}
	local, remote := c.Local, c.Remote
	selIn, selOut, err := selectorsOf(c.LocalTS, c.RemoteTS)
	if err != nil {
		return in, out, err
	}
	in = sa.Config{Src: remote.Addr(), Dst: local.Addr(), SPI: c.InSPI, Dir: sa.DirIn, Mode: mode, IfID: ch.IfID,
		ReplayWindow: ch.ReplayWindow, ESN: c.ESN, Selector: selIn}
	out = sa.Config{Src: local.Addr(), Dst: remote.Addr(), SPI: c.OutSPI, Dir: sa.DirOut, Mode: mode, IfID: ch.IfID,
		ESN: c.ESN, Selector: selOut}
	if lt := ch.LifeTime; lt > 0 {
		// The data path stops the pair at life_time even if IKE could
		// not delete it; a little later than our own delete.
		in.Lifetime.HardAdd = lt + 10*time.Second
		out.Lifetime.HardAdd = lt + 10*time.Second
	}
	if c.Encap {
		in.Encap = &sa.Encap{SrcPort: remote.Port(), DstPort: local.Port()}
		out.Encap = &sa.Encap{SrcPort: local.Port(), DstPort: remote.Port()}
	}
	if err := setAlgorithms(&in, c.Suite, c.In); err != nil {
		return in, out, err
	}
	if err := setAlgorithms(&out, c.Suite, c.Out); err != nil {
		in.ClearKeys()
		return in, out, err
	}
	return in, out, nil
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
