package vici

import (
	"crypto/x509"
	"net/netip"
	"strconv"
	"strings"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/ike/message"
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

// connSection writes a connection as charon 5.9's list-conn does, key
// for key (reauth_time 0: ipsecd does not reauthenticate; unique as
// charon names its policies, UNIQUE_NO to UNIQUE_REPLACE), with if_id_in
// and if_id_out where a child has an if_id.
func connSection(c config.Connection) *Message {
	unique := "UNIQUE_" + strings.ToUpper(string(c.Unique))
	if c.Unique == "" {
		unique = "UNIQUE_NO"
	}
	m := NewMessage().
		Set("local_addrs", addrs(c.LocalAddrs, c.LocalAny)).
		Set("remote_addrs", addrs(c.RemoteAddrs, c.RemoteAny)).
		Set("version", "IKEv2").
		Set("reauth_time", "0").
		Set("rekey_time", strconv.FormatInt(int64(c.RekeyTime.Seconds()), 10)).
		Set("unique", unique)
	if c.DPDDelay > 0 {
		m.Set("dpd_delay", strconv.FormatInt(int64(c.DPDDelay.Seconds()), 10))
	}
	own := c.Local.Certs
	if len(own) > 1 {
		own = own[:1] // the rest is its chain, which charon does not list
	}
	m.Set("local-1", authSection(c.Local, own)).Set("remote-1", authSection(c.Remote, c.Remote.Certs))
	children := NewMessage()
	for _, ch := range c.Children {
		mode := "TUNNEL"
		if ch.Transport {
			mode = "TRANSPORT"
		}
		cm := NewMessage().Set("mode", mode).
			Set("rekey_time", strconv.FormatInt(int64(ch.RekeyTime.Seconds()), 10)).
			Set("rekey_bytes", "0").
			Set("rekey_packets", "0").
			Set("dpd_action", dpdAction(ch.DPDAction)).
			Set("close_action", "none").
			Set("local-ts", prefixes(ch.LocalTS)).
			Set("remote-ts", prefixes(ch.RemoteTS))
		if ch.IfID != 0 {
			cm.Set("if_id_in", strconv.FormatUint(uint64(ch.IfID), 10)).Set("if_id_out", strconv.FormatUint(uint64(ch.IfID), 10))
		}
		children.Set(ch.Name, cm)
	}
	return m.Set("children", children)
}

// dpdAction writes a dpd_action as charon's action names: clear is its
// none (the child is left down), restart its start.
func dpdAction(a config.DPDAction) string {
	switch a {
	case config.DPDActionRestart:
		return "start"
	case config.DPDActionTrap:
		return "trap"
	}
	return "none"
}

// authSection writes an endpoint's auth as list-conn's local-N and
// remote-N sections, as charon does: certs (ours, or the peer's pinned)
// and cacerts by subject.
func authSection(e config.Endpoint, certs []*x509.Certificate) *Message {
	id := e.ID
	if id == "" {
		id = "%any"
	}
	m := NewMessage().Set("id", id).Set("class", authClass(string(e.Auth)))
	if method, ok := strings.CutPrefix(string(e.Auth), "eap-"); ok {
		m.Set("eap-type", "EAP_"+strings.ToUpper(method))
		if e.EAPID != "" {
			m.Set("eap_id", e.EAPID)
		}
	}
	return m.Set("groups", []string{}).Set("cert_policy", []string{}).Set("certs", subjects(certs)).Set("cacerts", subjects(e.CACertList))
}

// subjects writes certificates as charon's list-conn does: by subject
// DN, as strongSwan prints one.
func subjects(cs []*x509.Certificate) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, ike.NewIdentity(message.IDDN, c.RawSubject).String())
	}
	return out
}

// authClass writes an auth method as charon's auth_class_names.
func authClass(auth string) string {
	switch {
	case auth == "psk":
		return "pre-shared key"
	case auth == "pubkey":
		return "public key"
	case strings.HasPrefix(auth, "eap-"):
		return "EAP"
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

// listPolicies streams, with trap=yes, the trap policies of children
// with start_action trap (charon's trap policies; ike and child select),
// as charon 5.9 writes them, and answers. ipsecd has no drop or pass
// shunt policies in connections.
func listPolicies(r *request) *Message {
	if !yes(r.msg.String("trap")) && r.msg.String("trap") == "" {
		return NewMessage()
	}
	want, wantIKE := r.msg.String("child"), r.msg.String("ike")
	for _, c := range r.conn.s.backend.Connections() {
		if wantIKE != "" && c.Name != wantIKE {
			continue
		}
		for _, ch := range c.Children {
			if ch.StartAction != config.StartActionTrap || (want != "" && ch.Name != want) {
				continue
			}
			mode := "TUNNEL"
			if ch.Transport {
				mode = "TRANSPORT"
			}
			m := NewMessage().Set("child", ch.Name).Set("ike", c.Name).Set("mode", mode).
				Set("local-ts", prefixes(ch.LocalTS)).Set("remote-ts", prefixes(ch.RemoteTS))
			if r.emit("list-policy", NewMessage().Set(c.Name+"/"+ch.Name, m)) != nil {
				return NewMessage()
			}
		}
	}
	return NewMessage()
}
