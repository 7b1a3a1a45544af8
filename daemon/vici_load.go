package daemon

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/vici"
)

// Connections and secrets loaded over vici (vici.Loader). They are
// vici's, as the file's are the file's: kept as items of the config
// file's connections: and secrets: (YAML, from package vici), parsed
// with the file's rules beside the file's interfaces, and handed to IKE
// with the file's connections (ikeConfig) at every change of either.
// IKE keeps the SAs of a connection whose parsed config did not change,
// so loading an unchanged connection leaves them up.

var _ vici.Loader = (*backend)(nil)

// viciLoaded is what vici loaded, in load order. Daemon.mu guards it.
type viciLoaded struct {
	conns, secrets []loadedItem
	// cfg is conns and secrets parsed: its IKEConfig is what IKE runs
	// beside the file's; nil when no connection is loaded.
	cfg *config.Config
}

type loadedItem struct {
	name string
	item []byte // YAML; a secret's holds its key, zeroed when dropped
}

// wipe zeroes what vici loaded: the secrets' items and the keys parsed
// from them.
func (l *viciLoaded) wipe() {
	for _, s := range l.secrets {
		clear(s.item)
	}
	if l.cfg != nil {
		l.cfg.WipeKeys()
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

// errFromFile refuses a vici change that would touch the file's own.
var errFromFile = errors.New("comes from the config file; vici loads and unloads only its own")

// LoadConn adds or replaces a connection of vici's and applies it.
func (b *backend) LoadConn(name string, item []byte) error {
	n := (*Daemon)(b)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cfg == nil {
		return fmt.Errorf("%w: this daemon runs no config file", control.ErrInvalid)
	}
	if slices.ContainsFunc(n.cfg.Connections, func(c config.Connection) bool { return c.Name == name }) {
		return fmt.Errorf("connection %q %w", name, errFromFile)
	}
	conns := put(slices.Clone(n.loaded.conns), name, item)
	return n.applyViciLocked(conns)
}

// UnloadConn removes a connection of vici's; its SAs are deleted.
func (b *backend) UnloadConn(name string) error {
	n := (*Daemon)(b)
	n.mu.Lock()
	defer n.mu.Unlock()
	conns, ok := drop(slices.Clone(n.loaded.conns), name)
	if !ok {
		if n.cfg != nil && slices.ContainsFunc(n.cfg.Connections, func(c config.Connection) bool { return c.Name == name }) {
			return fmt.Errorf("connection %q %w", name, errFromFile)
		}
		return fmt.Errorf("%w: no connection %q loaded over vici", control.ErrNotFound, name)
	}
	return n.applyViciLocked(conns)
}

// ViciConns returns the names of vici's connections.
func (b *backend) ViciConns() []string {
	n := (*Daemon)(b)
	n.mu.Lock()
	defer n.mu.Unlock()
	return names(n.loaded.conns)
}

// LoadShared adds or replaces a secret of vici's, checked at once; the
// connections loaded from then on use it.
func (b *backend) LoadShared(id string, item []byte) error {
	cfg, err := parseVici(nil, nil, []loadedItem{{id, item}})
	if err != nil {
		clear(item)
		return err
	}
	cfg.WipeKeys()
	n := (*Daemon)(b)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.loaded.secrets = put(n.loaded.secrets, id, item)
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
}

// SharedIDs returns the ids of vici's secrets.
func (b *backend) SharedIDs() []string {
	n := (*Daemon)(b)
	n.mu.Lock()
	defer n.mu.Unlock()
	return names(n.loaded.secrets)
}

// applyViciLocked parses conns with vici's secrets beside the running
// file, and hands IKE the result; on error nothing changes. n.mu is held.
func (n *Daemon) applyViciLocked(conns []loadedItem) error {
	var cfg *config.Config
	if len(conns) > 0 {
		var err error
		if cfg, err = parseVici(n.cfg.Interfaces, conns, n.loaded.secrets); err != nil {
			return err
		}
		if err := clash(n.cfg, cfg); err != nil {
			cfg.WipeKeys()
			return err
		}
	}
	prev := n.loaded.cfg
	n.loaded.conns, n.loaded.cfg = conns, cfg
	if m := n.ike.running(); m != nil {
		res, err := m.Reload(n.ikeConfig(n.cfg))
		if err != nil {
			return err
		}
		n.log.WithFields(map[string]any{"added": res.Added, "removed": res.Removed, "changed": res.Changed, "unchanged": res.Unchanged}).
			Info("vici: connections loaded")
	} else if err := n.startIKE(n.cfg); err != nil {
		return err
	}
	if prev != nil {
		prev.WipeKeys() // IKE holds copies of what it runs
	}
	return nil
}

// parseVici parses vici's items as a config file of the running file's
// interfaces (what if_id may name), secrets and connections.
func parseVici(ifaces []config.Interface, conns, secrets []loadedItem) (*config.Config, error) {
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
	}{{"secrets", secrets}, {"connections", conns}} {
		if len(sec.items) == 0 {
			continue
		}
		doc = append(doc, sec.key+":\n"...)
		for _, it := range sec.items {
			doc = append(append(append(doc, "  - "...), it.item...), '\n')
		}
	}
	defer clear(doc) // it holds the secrets
	cfg, err := config.Parse("vici", doc)
	if err != nil {
		return nil, viciError(err)
	}
	return cfg, nil
}

// viciLine is the place config.Parse names in a line about the document
// parseVici made: no file the client knows.
var viciLine = regexp.MustCompile(`(?m)^vici:\d+: (connections|secrets)\[\d+\]\.?`)

// viciError rewrites config.Parse's errors about parseVici's document
// without its line numbers.
func viciError(err error) error {
	msg := viciLine.ReplaceAllString(err.Error(), "")
	return errors.New(strings.TrimSpace(strings.ReplaceAll(msg, "\n", "; ")))
}

// clash refuses vici's connections whose names or children's names the
// file has: IKE finds connections and children by name alone.
func clash(file, v *config.Config) error {
	have := map[string]bool{}
	for _, c := range file.Connections {
		have["connection "+c.Name] = true
		for _, ch := range c.Children {
			have["child "+ch.Name] = true
		}
	}
	for _, c := range v.Connections {
		if have["connection "+c.Name] {
			return fmt.Errorf("connection %q %w", c.Name, errFromFile)
		}
		for _, ch := range c.Children {
			if have["child "+ch.Name] {
				return fmt.Errorf("child %q of %s: a child of that name %w", ch.Name, c.Name, errFromFile)
			}
		}
	}
	return nil
}

// ikeConfig is what IKE runs: cfg's connections and secrets, and vici's
// (those whose names the file has not taken since they were loaded:
// the file's win). n.mu is held, or IKE is being started.
func (n *Daemon) ikeConfig(cfg *config.Config) *config.IKEConfig {
	ic := cfg.IKEConfig
	v := n.loaded.cfg
	if v == nil {
		return &ic
	}
	if ic.IKE.Port == 0 { // the file has no IKE: vici's defaults
		ic.IKE = v.IKE
	}
	ic.Connections = slices.Clone(ic.Connections)
	ic.Secrets = append(slices.Clone(ic.Secrets), v.Secrets...)
	for _, c := range v.Connections {
		if err := clash(cfg, &config.Config{IKEConfig: config.IKEConfig{Connections: []config.Connection{c}}}); err != nil {
			n.log.WithError(err).Warn("vici: the config file took this name: the connection loaded over vici is left out")
			continue
		}
		ic.Connections = append(ic.Connections, c)
	}
	return &ic
}
