//go:build linux

package charontest

import (
	"fmt"
	"strings"
)

// PSK is the pre-shared key of the test connections; not a secret.
const PSK = "a-test-psk-not-a-secret"

// Peer is one side of a connection: swanctl.conf's local or remote block.
type Peer struct {
	Auth    string // "psk" (default), "pubkey", "eap-mschapv2", "eap-md5", "eap-tls"
	ID      string
	EAPID   string // eap_id: the EAP identity of a local EAP auth
	Certs   string // local pubkey: certificate file
	CACerts string // remote pubkey: trust anchor file
}

// Conn is one connection of swanctl.conf with one child (or Children),
// named as swanctl.conf names its keys. Empty fields are left out (charon's
// defaults) unless the field says otherwise.
type Conn struct {
	Name        string // default "test"
	Child       string // default "net"
	LocalAddrs  string
	RemoteAddrs string
	Proposals   string
	Encap       bool   // encap = yes; default no
	DPDDelay    string // dpd_delay; default 0s (none)
	RekeyTime   string // the IKE SA's rekey_time
	Unique      string // unique: no (charon's default), never, replace, keep
	Local       Peer
	Remote      Peer
	LocalTS     string
	RemoteTS    string
	ESP         string // esp_proposals
	StartAction string // default none
	DPDAction   string // dpd_action
	ChildRekey  string // the child's rekey_time
	// Secret is the PSK for Local.ID and Remote.ID; default PSK. It is
	// written only when both sides authenticate with psk.
	Secret string
	// Children, when set, are the connection's children instead of the
	// one that Child and the fields after LocalTS describe.
	Children []Child
	// VIPs asks the gateway for virtual IPs (vips: 0.0.0.0, ::); Pools
	// names the pools a gateway hands out, which PoolsConf (swanctl.conf's
	// pools section, written as it is) defines.
	VIPs, Pools, PoolsConf string
	// EAPSecret is the password of Local.EAPID (a client's), or of
	// Remote.EAPID when local has none (a gateway's one user), written
	// when set.
	EAPSecret string
}

// Child is one child of a Conn with several: swanctl.conf's children
// section. Empty fields are left out (start_action: none).
type Child struct {
	Name, LocalTS, RemoteTS, ESP, StartAction string
	Transport                                 bool
}

// String is the swanctl.conf text of c, with its secret.
func (c Conn) String() string {
	or := func(s, def string) string {
		if s == "" {
			return def
		}
		return s
	}
	encap := "no"
	if c.Encap {
		encap = "yes"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "connections {\n  %s {\n    version = 2\n", or(c.Name, "test"))
	line := func(indent, key, v string) {
		if v != "" {
			fmt.Fprintf(&b, "%s%s = %s\n", indent, key, v)
		}
	}
	line("    ", "local_addrs", c.LocalAddrs)
	line("    ", "remote_addrs", c.RemoteAddrs)
	line("    ", "proposals", c.Proposals)
	line("    ", "encap", encap)
	line("    ", "mobike", "no")
	line("    ", "dpd_delay", or(c.DPDDelay, "0s"))
	line("    ", "rekey_time", c.RekeyTime)
	line("    ", "unique", c.Unique)
	line("    ", "vips", c.VIPs)
	line("    ", "pools", c.Pools)
	for _, p := range []struct {
		block string
		peer  Peer
	}{{"local", c.Local}, {"remote", c.Remote}} {
		fmt.Fprintf(&b, "    %s {\n", p.block)
		line("      ", "auth", or(p.peer.Auth, "psk"))
		line("      ", "id", p.peer.ID)
		line("      ", "eap_id", p.peer.EAPID)
		line("      ", "certs", p.peer.Certs)
		line("      ", "cacerts", p.peer.CACerts)
		b.WriteString("    }\n")
	}
	b.WriteString("    children {\n")
	if len(c.Children) == 0 {
		fmt.Fprintf(&b, "      %s {\n        mode = tunnel\n", or(c.Child, "net"))
		line("        ", "local_ts", c.LocalTS)
		line("        ", "remote_ts", c.RemoteTS)
		line("        ", "esp_proposals", c.ESP)
		line("        ", "rekey_time", c.ChildRekey)
		line("        ", "start_action", or(c.StartAction, "none"))
		line("        ", "dpd_action", c.DPDAction)
		b.WriteString("      }\n")
	}
	for _, ch := range c.Children {
		mode := "tunnel"
		if ch.Transport {
			mode = "transport"
		}
		fmt.Fprintf(&b, "      %s {\n        mode = %s\n", ch.Name, mode)
		line("        ", "local_ts", ch.LocalTS)
		line("        ", "remote_ts", ch.RemoteTS)
		line("        ", "esp_proposals", ch.ESP)
		line("        ", "start_action", or(ch.StartAction, "none"))
		b.WriteString("      }\n")
	}
	b.WriteString("    }\n  }\n}\n")
	if or(c.Local.Auth, "psk") == "psk" && or(c.Remote.Auth, "psk") == "psk" {
		fmt.Fprintf(&b, "secrets {\n  ike-test {\n    id-a = %s\n    id-b = %s\n    secret = %q\n  }\n}\n",
			c.Local.ID, c.Remote.ID, or(c.Secret, PSK))
	}
	b.WriteString(c.PoolsConf)
	if c.EAPSecret != "" {
		fmt.Fprintf(&b, "secrets {\n  eap-test {\n    id = %s\n    secret = %q\n  }\n}\n", or(c.Local.EAPID, c.Remote.EAPID), c.EAPSecret)
	}
	return b.String()
}
