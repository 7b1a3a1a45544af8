package ikenode

import (
	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/ike"
)

// ReloadResult counts what Reload (or ReloadConns) did with the
// connections it examined.
type ReloadResult struct {
	Added, Removed, Changed, Unchanged int
}

// Reload applies a new config's IKE sections: a connection that is gone
// or changed is terminated, a changed or new one is brought up as its
// start_action says, an unchanged one is left as it is.
func (m *Daemon) Reload(ic *config.IKEConfig) (ReloadResult, error) { return m.reload(ic, nil) }

// ReloadConns is Reload after a change of the connections names alone (a
// vici load-conn or unload-conn): only the named connections are built
// from ic and compared with what runs, and one that ic lacks is removed;
// the others run on unexamined, whether ic has them or not (it needs only
// the named ones, and the settings Reload takes). A new connection comes
// last in the order, a changed one keeps its place. Reload builds every
// connection's engine config to compare it, so that loading 1,000
// connections one at a time cost a quadratic number of them; with
// ReloadConns, loading the n-th costs about what loading the first did.
func (m *Daemon) ReloadConns(ic *config.IKEConfig, names ...string) (ReloadResult, error) {
	only := make(map[string]bool, len(names))
	for _, name := range names {
		only[name] = true
	}
	return m.reload(ic, only)
}

// reload is Reload of the connections of only (nil: all of them).
func (m *Daemon) reload(ic *config.IKEConfig, only map[string]bool) (ReloadResult, error) {
	var res ReloadResult
	err := m.do(func() {
		now := m.clock.Now()
		if p := ic.IKE.Port; p != m.Port() && m.Port() != 0 && len(m.cfg.Listen) == 0 {
			m.log.Warnf("ike: port %d takes effect on restart; IKE stays on %d", p, m.Port())
		}
		m.cookies.Threshold = ic.IKE.CookieSetting()
		m.limits = limitsOf(ic.IKE)
		if m.resolveFile != ic.IKE.ResolveFile {
			m.resolveFile = ic.IKE.ResolveFile
			m.updateResolv() // resolv.go: our lines move
		}
		m.setEAPUsers(ic) // the next login asks the new users (eapusers.go)
		fresh := m.connsFrom(ic, only)
		built := make(map[string]bool, len(fresh))
		keep := map[string]bool{}
		for _, c := range fresh {
			built[c.cfg.Name] = true
			old := m.conns[c.cfg.Name]
			if old != nil && old.same(c) {
				keep[c.cfg.Name] = true
				clear(c.ec.PSK)
				res.Unchanged++
				continue
			}
			if old != nil {
				res.Changed++
			} else {
				res.Added++
			}
		}
		// The order of ic; for ReloadConns, the running order with the
		// new connections last.
		var order []string
		if only == nil {
			for i := range ic.Connections {
				if name := ic.Connections[i].Name; built[name] {
					order = append(order, name)
				}
			}
		} else {
			for _, name := range m.connOrder {
				if !only[name] || built[name] {
					order = append(order, name)
				}
			}
			for _, c := range fresh {
				if m.conns[c.cfg.Name] == nil {
					order = append(order, c.cfg.Name)
				}
			}
		}
		for _, name := range m.connOrder {
			if keep[name] || (only != nil && !only[name]) {
				continue
			}
			old := m.conns[name]
			if !built[name] {
				res.Removed++
			}
			delete(m.conns, name)
			for _, x := range append([]*ikeSA(nil), m.sas...) {
				if x.conn == old && !x.ended {
					x.why = ReasonReload
					if x.sa.State() == ike.StateEstablished {
						x.terminated = true
						m.deleteSA(x, now)
					} else {
						m.down(x, now)
					}
				}
			}
			clear(old.ec.PSK)
			m.untrap(old)
		}
		m.connOrder = order
		for _, c := range fresh {
			if keep[c.cfg.Name] {
				continue
			}
			m.conns[c.cfg.Name] = c
			m.startConn(c, now)
		}
	})
	return res, err
}
