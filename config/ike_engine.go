package config

import (
	"fmt"
	"slices"

	"github.com/ipsecd/ipsecd/ike"
)

// EngineConfig returns what the ike engine takes for connection conn with
// child as the one its IKE_AUTH proposes: the IKE SA's settings, and all
// the connection's children (Config.Children). The PSK is a
// copy: WipeKeys on the file's Config leaves it alone, and the engine's
// owner clears it when done. Rand and AllocSPI are left for the daemon.
func (c *IKEConfig) EngineConfig(conn, child string) (*ike.Config, error) {
	cn := c.Connection(conn)
	if cn == nil {
		return nil, fmt.Errorf("config: no connection %q", conn)
	}
	for i := range cn.Children {
		if ch := &cn.Children[i]; ch.Name == child {
			return c.EngineConfigOf(cn, ch, eapSecrets(c.Secrets)), nil
		}
	}
	return nil, fmt.Errorf("config: connection %q has no child %q", conn, child)
}

// EngineConfigOf is EngineConfig of connection cn with its child ch, as
// found (a walk of c.Connections: no lookup by name per connection),
// with c's ike: settings, and eap as the engine's EAPSecret when cn
// authenticates with EAP: the daemon passes one lookup of its EAP user
// store for all connections, so that a reload changes who can log in
// without a copy of the users per connection.
func (c *IKEConfig) EngineConfigOf(cn *Connection, ch *Child, eap func(string) ([]byte, bool)) *ike.Config {
	return cn.engineConfig(c.IKE, ch, eap)
}

func (cn *Connection) engineConfig(i IKE, ch *Child, eap func(string) ([]byte, bool)) *ike.Config {
	ec := &ike.Config{
		LocalID:     cn.Local.Identity,
		RemoteID:    cn.Remote.Identity,
		LocalAuth:   cn.Local.Auth,
		RemoteAuth:  cn.Remote.Auth,
		LocalCerts:  cn.Local.Certs,
		PrivateKey:  cn.Local.PrivateKey,
		CACerts:     cn.Remote.CACertList,
		PeerCerts:   cn.Remote.Certs, // remote's certs: pinned
		Proposals:   cn.Proposals,
		ForceEncap:  cn.Encap,
		Retransmit:  i.Retransmit,
		MaxChildren: i.MaxChildren,
		Keylog:      i.Keylog != "",
		Child:       ch.engineConfig(),
	}
	for i := range cn.Children {
		ec.Children = append(ec.Children, cn.Children[i].engineConfig())
	}
	if cn.PSK != nil {
		ec.PSK = slices.Clone([]byte(cn.PSK))
	}
	ec.VIPs = cn.VIPs
	if cn.Remote.Auth.IsEAP() {
		ec.RemoteEAPID = cn.Remote.EAPID
		ec.EAPSecret = eap
	}
	if cn.Local.Auth.IsEAP() {
		ec.LocalEAPID = cn.Local.EAPID
		ec.EAPSecret = eap
	}
	return ec
}

func (ch *Child) engineConfig() ike.ChildConfig {
	return ike.ChildConfig{Name: ch.Name, Proposals: ch.ESPProposals, LocalTS: ch.LocalTS, RemoteTS: ch.RemoteTS, Transport: ch.Transport}
}
