// Package stackfile builds a sidecar (package stack) from a daemon config
// file (package config): the file's one interface, its states and
// policies, underlay.udp and state_dir. It is apart from stack so that a
// program that builds its Net from stack.Config alone links neither the
// YAML decoder nor the IKE sections' packages that config brings.
package stackfile

import (
	"fmt"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/stack"
)

// New is stack.New for a parsed daemon config file with exactly one
// interface: its addresses, routes, mtu and if_id, the states, the
// policies and underlay.udp. The interface's queues are ignored (a
// netstack has one); raw_esp and mark are refused, as a netstack's ESP
// goes over UDP and can never loop back into a TUN. Log, control and
// metrics are the daemon's and are ignored.
func New(c *config.Config) (*stack.Net, error) {
	cfg, err := Config(c)
	if err != nil {
		return nil, err
	}
	n, err := stack.New(cfg)
	if err != nil && c.File != "" {
		return nil, fmt.Errorf("%s: %w", c.File, err)
	}
	return n, err
}

// Config is the stack.Config New builds from c, for a caller that
// changes it before stack.New (package stackike, whose road warrior's
// address comes from its gateway).
func Config(c *config.Config) (stack.Config, error) {
	if c == nil {
		return stack.Config{}, fmt.Errorf("%w: nil config", stack.ErrInvalidConfig)
	}
	if len(c.Interfaces) != 1 {
		return stack.Config{}, fmt.Errorf("%w: %s: interfaces: %d, want exactly one", stack.ErrInvalidConfig, c.File, len(c.Interfaces))
	}
	if c.Underlay.RawESP {
		return stack.Config{}, fmt.Errorf("%w: %s: underlay.raw_esp: not supported by the netstack (ESP in UDP only)", stack.ErrInvalidConfig, c.File)
	}
	if c.Underlay.Mark != 0 {
		return stack.Config{}, fmt.Errorf("%w: %s: underlay.mark: not supported by the netstack (it needs CAP_NET_ADMIN and has no TUN to loop into)", stack.ErrInvalidConfig, c.File)
	}
	ifc := c.Interfaces[0]
	cfg := stack.Config{
		Name:      ifc.Name,
		Underlay:  c.Underlay.UDP,
		Addresses: ifc.Addresses,
		Routes:    ifc.Routes,
		MTU:       ifc.MTU,
		IfID:      ifc.IfID,
		Policies:  c.Policies,
		StateDir:  c.StateDir,
	}
	for _, st := range c.States {
		cfg.States = append(cfg.States, st.Config)
	}
	return cfg, nil
}
