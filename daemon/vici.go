package daemon

import (
	"fmt"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/vici"
)

// The vici socket (the config's vici:): strongSwan's protocol over the
// daemon's IKE, its config and its events (package vici).

var _ vici.Backend = (*backend)(nil)

// Connections returns the connections IKE runs: the running config's
// and those loaded over vici.
func (b *backend) Connections() []config.Connection {
	n := (*Daemon)(b)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cfg == nil {
		return nil
	}
	return n.ikeConfig(n.cfg).Connections
}

// ReloadConfig is Reload without its summary (vici's reload-settings).
func (b *backend) ReloadConfig() error {
	_, err := b.Reload()
	return err
}

// openVici serves vici at path, unless path is "" (vici: left out).
func (n *Daemon) openVici(path string) error {
	if path == "" {
		return nil
	}
	s, err := vici.Listen(path, (*backend)(n), n.log.WithField("part", "vici"))
	if err != nil {
		return err
	}
	s.Events = n.events
	n.vici = s
	go s.Serve()
	n.log.WithField("socket", path).Info("vici: serving strongSwan's vici protocol")
	return nil
}

// reloadVici opens, moves or closes the vici socket as a reloaded
// config's vici: says.
func (n *Daemon) reloadVici(path string) error {
	old := ""
	if n.vici != nil {
		old = n.vici.Path()
	}
	if path == old {
		return nil
	}
	if n.vici != nil {
		n.vici.Close()
		n.vici = nil
		n.log.WithField("socket", old).Info("vici: closed")
	}
	if err := n.openVici(path); err != nil {
		return fmt.Errorf("vici: %w", err)
	}
	return nil
}
