package ikenode

import (
	"fmt"
	"time"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/internal/printable"
	"github.com/ipsecd/ipsecd/node"
	"github.com/ipsecd/ipsecd/sa"
)

// Errors of the control requests. Each wraps the control socket's code
// for it (control.ErrNotFound, control.ErrInvalid), so that the daemon
// hands them to the client as they are.
var (
	// ErrNotFound: the request names a connection or child the config
	// does not have; ike list shows what there is.
	ErrNotFound = fmt.Errorf("%w: no such connection or child", control.ErrNotFound)
	// ErrState: the state refuses the action (initiate of what is up,
	// terminate or rekey of what is not).
	ErrState = fmt.Errorf("%w: not possible in this state", control.ErrInvalid)
)

// List returns the IKE SAs with their children.
func (m *Daemon) List() ([]control.IKESAInfo, error) {
	var out []control.IKESAInfo
	err := m.do(func() {
		now := m.clock.Now()
		for _, x := range m.sas {
			out = append(out, m.info(x, now))
		}
	})
	return out, err
}

// peerText is the peer's identity as ike list shows it (escaped, see
// ike.Identity.String), "" before it authenticated.
func peerText(s *ike.SA) string {
	if s.PeerID().IsAny() {
		return ""
	}
	return s.PeerID().String()
}

func secondsUntil(t, now time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return max(int64(t.Sub(now)/time.Second), 0)
}

func (m *Daemon) info(x *ikeSA, now time.Time) control.IKESAInfo {
	l, r := x.sa.Addrs()
	i, rs := x.sa.SPIs()
	state := x.sa.State().String()
	switch {
	case x.dropped: // the peer restarted: not replaced, just gone
		state = "DELETING"
	case x.rekeyed:
		state = "REKEYED"
	case x.ended && x.sa.State() == ike.StateDeleted:
		state = "DELETING"
	}
	info := control.IKESAInfo{Name: x.conn.cfg.Name, State: state, Initiator: x.sa.IsInitiator(),
		SPIInitiator: spiHex(i), SPIResponder: spiHex(rs), Local: l, Remote: r,
		LocalID: x.sa.LocalID().String(), RemoteID: peerText(x.sa), NAT: x.sa.NAT(), Established: x.up,
		RekeyIn: secondsUntil(x.rekeyAt, now), ExpiresIn: secondsUntil(x.expireAt, now), Children: []control.IKEChildInfo{}}
	if x.sa.State() == ike.StateEstablished {
		info.Algorithms = x.sa.Suite().String()
		info.KeyExchanges = x.sa.Suite().KeyExchanges()
	}
	info.RemoteEAPID = printable.Escape(x.sa.EAPIdentity())
	info.RemoteAuth = string(x.sa.PeerAuth())
	for _, a := range x.sa.VirtualIPs() {
		info.RemoteVIPs = append(info.RemoteVIPs, a.String())
	}
	for _, a := range x.sa.LocalVirtualIPs() {
		info.LocalVIPs = append(info.LocalVIPs, a.String())
	}
	for _, a := range x.sa.Configuration().DNS {
		info.DNS = append(info.DNS, a.String())
	}
	for _, d := range x.sa.Configuration().Domains {
		info.DNSDomains = append(info.DNSDomains, printable.Escape(d))
	}
	for _, c := range x.sa.Children() {
		rec := m.children[c]
		if rec == nil {
			continue
		}
		ci := control.IKEChildInfo{Name: c.Name, State: "INSTALLED", Mode: "TUNNEL", IfID: x.conn.childOf(c).IfID, Encap: c.Encap,
			SPIIn: fmt.Sprintf("%#x", c.InSPI), SPIOut: fmt.Sprintf("%#x", c.OutSPI), Algorithms: c.Suite.String(),
			LocalTS: tsStrings(c.LocalTS), RemoteTS: tsStrings(c.RemoteTS), Installed: rec.at,
			RekeyIn: secondsUntil(rec.rekeyAt, now), ExpiresIn: secondsUntil(rec.lifeAt, now)}
		if c.Transport {
			ci.Mode = "TRANSPORT"
		}
		if c.OutboundWaits() {
			ci.State = "REKEYING"
		}
		if m.cfg.Stats != nil {
			if st, ok := m.cfg.Stats(rec.in); ok {
				ci.BytesIn, ci.PacketsIn = st.Bytes, st.Packets
			}
			if st, ok := m.cfg.Stats(rec.out); ok && rec.outbound {
				ci.BytesOut, ci.PacketsOut = st.Bytes, st.Packets
			}
		}
		info.Children = append(info.Children, ci)
	}
	return info
}

// tsStrings writes traffic selectors as swanctl does: 10.1.0.0/24, a
// range 10.1.0.5-10.1.0.9, a protocol and ports 10.1.0.0/24[tcp/80].
func tsStrings(ts []message.Selector) []string {
	out := make([]string, len(ts))
	for i, t := range ike.SATS(ts) {
		out[i] = t.String()
	}
	return out
}

// Target names what a control action acts on: a connection (IKE) or a
// child (Child); one of the two is set. It is the control socket's own
// (control.IKETarget), which the daemon hands on as it comes.
type Target = control.IKETarget

// lookup returns the connection t names.
func (m *Daemon) lookup(t Target) (*conn, error) {
	for _, name := range m.connOrder {
		c := m.conns[name]
		if (t.IKE != "" && c.cfg.Name == t.IKE) || (t.Child != "" && c.child(t.Child) != nil) {
			return c, nil
		}
	}
	if t.IKE != "" {
		return nil, fmt.Errorf("%w: connection %q", ErrNotFound, t.IKE)
	}
	return nil, fmt.Errorf("%w: child %q", ErrNotFound, t.Child)
}

// act runs f in the IKE goroutine on t's connection.
func (m *Daemon) act(t Target, f func(c *conn, now time.Time) error) error {
	var err error
	if derr := m.do(func() {
		c, lerr := m.lookup(t)
		if lerr != nil {
			err = lerr
			return
		}
		err = f(c, m.clock.Now())
	}); derr != nil {
		return derr
	}
	return err
}

// Initiate brings t up: a connection's children (all of them), or one
// child; under the connection's IKE SA when it is up or on its way (a
// CREATE_CHILD_SA each, one at a time), else with a new IKE SA whose
// IKE_AUTH carries the first. It returns once the first request is sent
// or queued; List shows the outcome.
func (m *Daemon) Initiate(t Target) error {
	return m.act(t, func(c *conn, now time.Time) error {
		names := c.childNames()
		if t.Child != "" {
			names = []string{t.Child}
		}
		x := m.liveSA(c)
		if x != nil {
			var missing []string
			for _, name := range names {
				if !m.hasChild(x, name) {
					missing = append(missing, name)
				}
			}
			if len(missing) == 0 {
				what := c.cfg.Name
				if t.Child != "" {
					what = "child " + t.Child
				}
				return fmt.Errorf("%w: %s is already up or on its way", ErrState, what)
			}
			names = missing
		}
		return m.bringUp(c, x, names, now)
	})
}

// Terminate deletes t: the IKE SAs of a connection (with their children),
// or one child, whose siblings stay. start_action start does not bring
// it back (until a reload or restart).
func (m *Daemon) Terminate(t Target) error {
	return m.act(t, func(c *conn, now time.Time) error {
		c.retryAt = time.Time{}
		found := false
		for _, x := range append([]*ikeSA(nil), m.sas...) {
			if x.conn != c || x.ended {
				continue
			}
			if t.IKE != "" {
				found = true
				x.terminated, x.why = true, ReasonTerminated
				m.deleteSA(x, now)
				continue
			}
			// One child: its creation waiting goes; under way in
			// IKE_AUTH, the IKE SA goes (it has nothing else yet).
			x.sa.CancelCreate(t.Child)
			if x.sa.State() != ike.StateEstablished {
				if x.first == t.Child {
					found = true
					x.terminated, x.why = true, ReasonTerminated
					m.deleteSA(x, now)
				}
				continue
			}
			for _, ch := range x.sa.Children() {
				if ch.Name != t.Child {
					continue
				}
				out, err := x.sa.DeleteChild(ch, now) // queued while an exchange is under way
				if err != nil {
					continue
				}
				found = true
				if rec := m.children[ch]; rec != nil {
					rec.why = ReasonTerminated
				}
				m.request(x, out)
			}
		}
		if !found {
			what := c.cfg.Name
			if t.Child != "" {
				what = "child " + t.Child
			}
			return fmt.Errorf("%w: %s is not up", ErrState, what)
		}
		return nil
	})
}

// Rekey rekeys t's IKE SA or child now.
func (m *Daemon) Rekey(t Target) error {
	return m.act(t, func(c *conn, now time.Time) error {
		x := m.liveSA(c)
		if x == nil || x.sa.State() != ike.StateEstablished {
			return fmt.Errorf("%w: %s is not up", ErrState, c.cfg.Name)
		}
		// An exchange under way: the engine queues the rekey behind
		// it, as swanctl queues its requests.
		if t.IKE != "" {
			out, err := x.sa.RekeyIKE(now)
			if err != nil {
				return err
			}
			x.rekeyAt = time.Time{}
			m.request(x, out)
			return nil
		}
		// The newest child of the name (a rekey in progress leaves the
		// old one until its delete).
		var ch *ike.Child
		for _, cc := range x.sa.Children() {
			if cc.Name == t.Child && !cc.Redundant {
				ch = cc
			}
		}
		if ch == nil {
			return fmt.Errorf("%w: child %s is not up", ErrState, t.Child)
		}
		out, err := x.sa.RekeyChild(ch, now)
		if err != nil {
			return err
		}
		if rec := m.children[ch]; rec != nil {
			rec.rekeyAt = now.Add(rekeyRetry) // unless the engine says it is rekeyed by then
		}
		m.request(x, out)
		return nil
	})
}

// StatsFromSAD returns a Config.Stats that reads sad: an inbound SA by
// SPI and destination (invalid: any), an outbound one by SPI and
// destination. It costs one lookup, whatever the number of SAs (ike list
// and RADIUS accounting ask for every child's).
func StatsFromSAD(sad *sa.SAD) func(node.StateID) (sa.Stats, bool) {
	return func(id node.StateID) (sa.Stats, bool) {
		s := sad.Lookup(id.Dir, id.SPI, id.Dst)
		if s == nil || (id.Dir != sa.DirIn && s.Dst() != id.Dst) {
			return sa.Stats{}, false
		}
		return s.Stats(), true
	}
}
