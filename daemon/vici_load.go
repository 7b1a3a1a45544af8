package daemon

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/ikenode"
	"github.com/ipsecd/ipsecd/vici"
)

// Connections and secrets loaded over vici (vici.Loader). They are
// vici's, as the file's are the file's: items of the config file's
// connections: and secrets: (YAML, from package vici). A connection is
// parsed with the file's rules when it is loaded, alone beside the
// file's interfaces and vici's secrets (so that loading the n-th costs
// what loading the first did), and handed to IKE with the file's
// connections (ikeConfig) at every change of either. IKE keeps the SAs
// of a connection whose parsed config did not change, so loading an
// unchanged connection leaves them up.

var _ vici.Loader = (*backend)(nil)

// viciLoaded is what vici loaded, in load order. Daemon.mu guards it.
type viciLoaded struct {
	conns   []loadedConn
	secrets []loadedItem
	pools   []config.Pool  // vici_pools.go
	eap     *config.Config // secrets parsed, for their EAP passwords (vici_eap.go)
}

type loadedItem struct {
	name string
	item []byte // YAML; a secret's holds its key, zeroed when dropped
}

// loadedConn is a connection vici loaded, parsed: cfg holds it alone
// (and the secrets it was parsed with, which its PSK shares).
type loadedConn struct {
	name string
	cfg  *config.Config
}

// conn returns the connection c holds.
func (c loadedConn) conn() config.Connection { return c.cfg.Connections[0] }

// wipe zeroes what vici loaded: the secrets' items and the keys parsed
// from them.
func (l *viciLoaded) wipe() {
	for _, s := range l.secrets {
		clear(s.item)
	}
	for _, c := range l.conns {
		c.cfg.WipeKeys()
	}
	if l.eap != nil {
		l.eap.WipeKeys()
	}
}

// put replaces the item named name, or appends it; the replaced item's
// bytes are zeroed.
func put(items []loadedItem, name string, item []byte) []loadedItem {
	for i := range items {
		if items[i].name == name {
			clear(items[i].item)
			items[i].item = item
			return items
		}
	}
	return append(items, loadedItem{name, item})
}

// drop removes the item named name and zeroes it; false if there is none.
func drop(items []loadedItem, name string) ([]loadedItem, bool) {
	for i := range items {
		if items[i].name == name {
			clear(items[i].item)
			return slices.Delete(items, i, i+1), true
		}
	}
	return items, false
}

func names(items []loadedItem) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.name
	}
	return out
}

func connNames(conns []loadedConn) []string {
	out := make([]string, len(conns))
	for i, c := range conns {
		out[i] = c.name
	}
	return out
}

// errFromFile refuses a vici change that would touch the file's own.
var errFromFile = errors.New("comes from the config file; vici loads and unloads only its own")

// LoadConn adds or replaces a connection of vici's and applies it.
func (b *backend) LoadConn(name string, item []byte, files map[string][]byte) error {
	n := (*Daemon)(b)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cfg == nil {
		return fmt.Errorf("%w: this daemon runs no config file", control.ErrInvalid)
	}
	cfg, err := parseVici(n.cfg.Interfaces, []loadedItem{{name, item}}, n.loaded.secrets, files, nil)
	if err != nil {
		return err
	}
	if err := n.clashLocked(cfg.Connections[0]); err != nil {
		cfg.WipeKeys()
		return err
	}
	if err := n.knownPoolsLocked(cfg.Connections[0]); err != nil {
		cfg.WipeKeys()
		return err
	}
	conns := slices.Clone(n.loaded.conns)
	i := slices.IndexFunc(conns, func(c loadedConn) bool { return c.name == name })
	if i < 0 {
		conns = append(conns, loadedConn{name, cfg})
	} else {
		conns[i] = loadedConn{name, cfg}
	}
	return n.applyViciLocked(conns, name)
}

// UnloadConn removes a connection of vici's; its SAs are deleted.
func (b *backend) UnloadConn(name string) error {
	n := (*Daemon)(b)
	n.mu.Lock()
	defer n.mu.Unlock()
	i := slices.IndexFunc(n.loaded.conns, func(c loadedConn) bool { return c.name == name })
	if i < 0 {
		if n.cfg != nil && slices.ContainsFunc(n.cfg.Connections, func(c config.Connection) bool { return c.Name == name }) {
			return fmt.Errorf("connection %q %w", name, errFromFile)
		}
		return fmt.Errorf("%w: no connection %q loaded over vici", control.ErrNotFound, name)
	}
	return n.applyViciLocked(slices.Delete(slices.Clone(n.loaded.conns), i, i+1), name)
}

// ViciConns returns the names of vici's connections.
func (b *backend) ViciConns() []string {
	n := (*Daemon)(b)
	n.mu.Lock()
	defer n.mu.Unlock()
	return connNames(n.loaded.conns)
}

// LoadShared adds or replaces a secret of vici's, checked at once; the
// connections loaded from then on use it.
func (b *backend) LoadShared(id string, item []byte) error {
	cfg, err := parseVici(nil, nil, []loadedItem{{id, item}}, nil, nil)
	if err != nil {
		clear(item)
		return err
	}
	cfg.WipeKeys()
	n := (*Daemon)(b)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.loaded.secrets = put(n.loaded.secrets, id, item)
	n.syncViciEAPLocked() // vici_eap.go
	return nil
}

// UnloadShared removes a secret of vici's.
func (b *backend) UnloadShared(id string) error {
	n := (*Daemon)(b)
	n.mu.Lock()
	defer n.mu.Unlock()
	var ok bool
	if n.loaded.secrets, ok = drop(n.loaded.secrets, id); !ok {
		return fmt.Errorf("%w: no secret %q loaded over vici", control.ErrNotFound, id)
	}
	n.syncViciEAPLocked()
	return nil
}

// ClearShared removes every secret of vici's.
func (b *backend) ClearShared() {
	n := (*Daemon)(b)
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, s := range n.loaded.secrets {
		clear(s.item)
	}
	n.loaded.secrets = nil
	n.syncViciEAPLocked()
}

// SharedIDs returns the ids of vici's secrets.
func (b *backend) SharedIDs() []string {
	n := (*Daemon)(b)
	n.mu.Lock()
	defer n.mu.Unlock()
	return names(n.loaded.secrets)
}

// applyViciLocked makes conns vici's connections and hands IKE the
// result; the parsed configs of connections replaced or dropped are
// zeroed once IKE runs the new ones (it holds copies of what it runs).
// changed names the connections that differ from what IKE runs (a
// load-conn's or unload-conn's one): IKE examines only those
// (ikenode.Daemon.ReloadConns), so that loading the n-th connection costs
// about what loading the first did; none: IKE examines every connection
// (a change of the pools or users, which any may use). n.mu is held.
func (n *Daemon) applyViciLocked(conns []loadedConn, changed ...string) error {
	prev := n.loaded.conns
	n.loaded.conns = conns
	var err error
	if m := n.ike.running(); m != nil {
		var res ikenode.ReloadResult
		if len(changed) != 0 {
			res, err = m.ReloadConns(n.ikeConfig(n.cfg, changed...), changed...)
		} else {
			res, err = m.Reload(n.ikeConfig(n.cfg))
		}
		if err == nil {
			n.log.WithFields(map[string]any{"added": res.Added, "removed": res.Removed, "changed": res.Changed, "unchanged": res.Unchanged}).
				Info("vici: connections loaded")
		}
	} else {
		err = n.startIKE(n.cfg)
	}
	kept, dropped := conns, prev
	if err != nil { // IKE did not take them: what it runs stays
		n.loaded.conns = prev
		kept, dropped = prev, conns
	}
	running := make(map[*config.Config]bool, len(kept))
	for _, c := range kept {
		running[c.cfg] = true
	}
	for _, old := range dropped {
		if !running[old.cfg] {
			old.cfg.WipeKeys()
		}
	}
	return err
}

// parseVici parses vici's items as a config file of the running file's
// interfaces (what if_id may name), secrets, connections and pools.
func parseVici(ifaces []config.Interface, conns, secrets []loadedItem, files map[string][]byte, pools []loadedItem) (*config.Config, error) {
	var doc []byte
	if len(ifaces) > 0 {
		doc = append(doc, "interfaces:\n"...)
		for _, ifc := range ifaces {
			doc = fmt.Appendf(doc, "  - {name: %q, if_id: %d}\n", ifc.Name, ifc.IfID)
		}
	}
	for _, sec := range []struct {
		key   string
		items []loadedItem
	}{{"secrets", secrets}, {"connections", conns}, {"pools", pools}} {
		if len(sec.items) == 0 {
			continue
		}
		doc = append(doc, sec.key+":\n"...)
		for _, it := range sec.items {
			doc = append(append(append(doc, "  - "...), it.item...), '\n')
		}
	}
	defer clear(doc) // it holds the secrets
	cfg, err := config.ParseMem("vici", doc, files)
	if err != nil {
		return nil, viciError(err)
	}
	return cfg, nil
}

// viciLine is the place config.Parse names in a line about the document
// parseVici made: no file the client knows.
var viciLine = regexp.MustCompile(`(?m)^vici:\d+: (connections|secrets|pools)\[\d+\]\.?`)

// viciError rewrites config.Parse's errors about parseVici's document
// without its line numbers.
func viciError(err error) error {
	msg := viciLine.ReplaceAllString(err.Error(), "")
	return errors.New(strings.TrimSpace(strings.ReplaceAll(msg, "\n", "; ")))
}

// knownPoolsLocked refuses a connection of vici's that names a pool
// neither the file nor vici has: swanctl --load-all loads pools before
// connections, so a name missing is a mistake. n.mu is held.
func (n *Daemon) knownPoolsLocked(c config.Connection) error {
	ic := n.cfg.IKEConfig.AddPools(n.loaded.pools)
	for _, name := range c.Pools {
		if ic.Pool(name) == nil {
			known := make([]string, len(ic.Pools))
			for i, p := range ic.Pools {
				known[i] = p.Name
			}
			return fmt.Errorf("pools: no pool is named %q; load-pool it first (the pools are %v)", name, known)
		}
	}
	return nil
}

// clashLocked refuses a connection of vici's whose name, or a child's,
// the file or another of vici's connections has: IKE finds connections
// and children by name alone. n.mu is held.
func (n *Daemon) clashLocked(c config.Connection) error {
	if err := clashFile(n.cfg, c); err != nil {
		return err
	}
	for _, other := range n.loaded.conns {
		if other.name == c.Name {
			continue // replaced
		}
		for _, ch := range c.Children {
			if slices.ContainsFunc(other.conn().Children, func(o config.Child) bool { return o.Name == ch.Name }) {
				return fmt.Errorf("child %q: connection %q loaded over vici has a child of that name", ch.Name, other.name)
			}
		}
	}
	return nil
}

// clashFile refuses a connection of vici's whose name, or a child's, the
// file has.
func clashFile(file *config.Config, c config.Connection) error {
	for _, fc := range file.Connections {
		if fc.Name == c.Name {
			return fmt.Errorf("connection %q %w", c.Name, errFromFile)
		}
		for _, ch := range c.Children {
			if slices.ContainsFunc(fc.Children, func(o config.Child) bool { return o.Name == ch.Name }) {
				return fmt.Errorf("child %q of %s: a child of that name %w", ch.Name, c.Name, errFromFile)
			}
		}
	}
	return nil
}

// ikeConfig is what IKE runs: cfg's connections and pools, and vici's
// (those whose names the file has not taken since they were loaded: the
// file's win). With only, it holds just the connections of those names,
// what ikenode.Daemon.ReloadConns takes: a vici load-conn then copies one
// connection, not all (680 bytes each, which for the n-th of 2,000 loaded
// one at a time cost more than the rest of the load). n.mu is held, or IKE
// is being started.
func (n *Daemon) ikeConfig(cfg *config.Config, only ...string) *config.IKEConfig {
	ic := cfg.IKEConfig
	ic.Secrets = n.withViciEAP(ic.Secrets) // vici_eap.go
	pools := n.viciPools(cfg)              // vici_pools.go
	if len(only) != 0 {
		ic.Connections = nil
		for _, c := range cfg.Connections {
			if slices.Contains(only, c.Name) {
				ic.Connections = append(ic.Connections, c)
			}
		}
	}
	if len(n.loaded.conns) == 0 {
		return ic.AddPools(pools)
	}
	if ic.IKE.Port == 0 { // the file has no IKE: the defaults
		ic.IKE = n.loaded.conns[0].cfg.IKE
	}
	ic.Connections = slices.Clone(ic.Connections)
	for _, lc := range n.loaded.conns {
		if len(only) != 0 && !slices.Contains(only, lc.name) {
			continue
		}
		c := lc.conn()
		if err := clashFile(cfg, c); err != nil {
			n.log.WithError(err).Warn("vici: the config file took this name: the connection loaded over vici is left out")
			continue
		}
		ic.Connections = append(ic.Connections, c)
	}
	return ic.AddPools(pools)
}
