package vici

import (
	"net/netip"
	"strconv"

	"github.com/ipsecd/ipsecd/config"
)

// listConns streams one list-conn event per connection of the config
// (ike selects one by name), with charon's keys for what ipsecd has.
func listConns(r *request) *Message {
	want := r.msg.String("ike")
	for _, c := range r.conn.s.backend.Connections() {
		if want != "" && c.Name != want {
			continue
		}
		if r.emit("list-conn", NewMessage().Set(c.Name, connSection(c))) != nil {
			break
		}
	}
	return NewMessage()
}

// connSection writes a connection as charon's list-conn does.
func connSection(c config.Connection) *Message {
	m := NewMessage().
		Set("local_addrs", addrs(c.LocalAddrs, c.LocalAny)).
		Set("remote_addrs", addrs(c.RemoteAddrs, c.RemoteAny)).
		Set("version", "IKEv2").
		Set("reauth_time", "0").
		Set("rekey_time", strconv.FormatInt(int64(c.RekeyTime.Seconds()), 10))
	if c.DPDDelay > 0 {
		m.Set("dpd_delay", strconv.FormatInt(int64(c.DPDDelay.Seconds()), 10))
	}
	m.Set("local-1", authSection(c.Local)).Set("remote-1", authSection(c.Remote))
	children := NewMessage()
	for _, ch := range c.Children {
		mode := "TUNNEL"
		if ch.Transport {
			mode = "TRANSPORT"
		}
		cm := NewMessage().Set("mode", mode).
			Set("rekey_time", strconv.FormatInt(int64(ch.RekeyTime.Seconds()), 10)).
			Set("life_time", strconv.FormatInt(int64(ch.LifeTime.Seconds()), 10)).
			Set("start_action", string(ch.StartAction)).
			Set("dpd_action", string(ch.DPDAction)).
			Set("local-ts", prefixes(ch.LocalTS)).
			Set("remote-ts", prefixes(ch.RemoteTS))
		if ch.IfID != 0 {
			cm.Set("if_id_in", strconv.FormatUint(uint64(ch.IfID), 10)).Set("if_id_out", strconv.FormatUint(uint64(ch.IfID), 10))
		}
		children.Set(ch.Name, cm)
	}
	return m.Set("children", children)
}

// authSection writes an endpoint's auth as list-conn's local-N and
// remote-N sections.
func authSection(e config.Endpoint) *Message {
	m := NewMessage().Set("class", authClass(string(e.Auth)))
	id := e.ID
	if id == "" {
		id = "%any"
	}
	m.Set("id", id)
	if len(e.CACerts) > 0 {
		m.Set("cacerts", e.CACerts)
	}
	if e.Cert != "" {
		m.Set("certs", []string{e.Cert})
	}
	return m
}

// authClass writes an auth method as charon's auth_class_names.
func authClass(auth string) string {
	switch auth {
	case "psk":
		return "pre-shared key"
	case "pubkey":
		return "public key"
	}
	return auth
}

// addrs writes a connection's addresses as swanctl does: %any for any.
func addrs(l []netip.Addr, anyAddr bool) []string {
	out := []string{}
	if anyAddr || len(l) == 0 {
		out = append(out, "%any")
	}
	for _, a := range l {
		out = append(out, a.String())
	}
	return out
}

func prefixes(l []netip.Prefix) []string {
	out := make([]string, len(l))
	for i, p := range l {
		out[i] = p.String()
	}
	return out
}

// getConns answers the names of the connections loaded over vici: none,
// as ipsecd loads connections from its config file only (charon's
// get-conns leaves out those of other backends alike).
func getConns(r *request) *Message { return NewMessage().Set("conns", []string{}) }

// listPolicies streams the trap policies of children with start_action
// trap (charon's trap policies), and answers. ipsecd has no drop or pass
// shunt policies in connections.
func listPolicies(r *request) *Message {
	if !yes(r.msg.String("trap")) && r.msg.String("trap") == "" {
		return NewMessage()
	}
	want := r.msg.String("child")
	for _, c := range r.conn.s.backend.Connections() {
		for _, ch := range c.Children {
			if ch.StartAction != config.StartActionTrap || (want != "" && ch.Name != want) {
				continue
			}
			mode := "TUNNEL"
			if ch.Transport {
				mode = "TRANSPORT"
			}
			m := NewMessage().Set("mode", mode).Set("local-ts", prefixes(ch.LocalTS)).Set("remote-ts", prefixes(ch.RemoteTS))
			if r.emit("list-policy", NewMessage().Set(c.Name+"/"+ch.Name, m)) != nil {
				return NewMessage()
			}
		}
	}
	return NewMessage()
}
