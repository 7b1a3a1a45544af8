package config

import (
	"net"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ipsecd/ipsecd/eapradius"
	"github.com/ipsecd/ipsecd/ike"
)

// EAPRADIUS is the eap_radius: section (strongSwan's
// charon.plugins.eap-radius): the RADIUS servers a gateway relays EAP to
// and reports accounting to.
type EAPRADIUS struct {
	Servers []RADIUSServer
	// Accounting sends Accounting-Requests (RFC 2866) to the same
	// servers; AccountingInterval is the Interim-Update interval when
	// the server's Access-Accept names none (0: none).
	Accounting         bool
	AccountingInterval time.Duration
	NASIdentifier      string
	// NASIP is the NAS-IP-Address (or NAS-IPv6-Address) of every
	// request; the zero Addr for each session's own (eapradius.Config).
	NASIP netip.Addr
	// RetransmitTimeout, RetransmitBase and RetransmitTries are
	// strongSwan's: the first wait, its growth per retransmission, and
	// the sends per server before the next is asked.
	RetransmitTimeout time.Duration
	RetransmitBase    float64
	RetransmitTries   int
	Line              int
}

// RADIUSServer is one item of eap_radius.servers.
type RADIUSServer struct {
	Name        string
	Address     string // host:port of authentication
	AcctAddress string // host:port of accounting
	Secret      Key
	Line        int
}

// The defaults and bounds of eap_radius's keys (strongSwan's defaults).
const (
	defaultRADIUSAuthPort = 1812
	defaultRADIUSAcctPort = 1813
	maxRetransmitTries    = 10
	minRADIUSSecret       = 16 // RFC 2865 §3: at least 16 octets
)

// ClientConfig returns the section as eapradius.New takes it; the
// secrets are shared, not copied (New copies them).
func (e *EAPRADIUS) ClientConfig() eapradius.Config {
	cfg := eapradius.Config{NASIdentifier: e.NASIdentifier, NASIP: e.NASIP, Timeout: e.RetransmitTimeout,
		Base: e.RetransmitBase, Tries: e.RetransmitTries}
	for _, s := range e.Servers {
		cfg.Servers = append(cfg.Servers, eapradius.Server{Name: s.Name, Address: s.Address, AcctAddress: s.AcctAddress, Secret: s.Secret})
	}
	return cfg
}

// eapRADIUS decodes eap_radius: into ic.EAPRADIUS.
func (d *decoder) eapRADIUS(n *yaml.Node, ic *IKEConfig) {
	m, ok := d.fields(n, "eap_radius", "servers", "accounting", "accounting_interval", "nas_identifier", "nas_ip",
		"retransmit_timeout", "retransmit_base", "retransmit_tries")
	if !ok {
		return
	}
	e := &EAPRADIUS{Line: n.Line, NASIdentifier: "ipsecd", RetransmitTimeout: 2 * time.Second, RetransmitBase: 1.4, RetransmitTries: 4}
	before := len(d.errs)
	if v := m["servers"]; v != nil {
		d.radiusServers(v, e)
	}
	if len(e.Servers) == 0 && len(d.errs) == before {
		d.errorf(n, "eap_radius.servers", "missing; want at least one {address, secret_file}")
	}
	if v := m["accounting"]; v != nil {
		e.Accounting, _ = d.bool(v, "eap_radius.accounting")
	}
	if v := m["accounting_interval"]; v != nil {
		if t, ok := d.duration(v, "eap_radius.accounting_interval"); ok {
			if t != 0 && t < time.Minute {
				d.errorf(v, "eap_radius.accounting_interval", "%v is under a minute; RFC 2869 §5.16 asks at least 60 s (0: none)", t)
			}
			e.AccountingInterval = t
		}
	}
	if v := m["nas_identifier"]; v != nil {
		if s, ok := d.str(v, "eap_radius.nas_identifier"); ok {
			if s == "" || len(s) > 253 {
				d.errorf(v, "eap_radius.nas_identifier", "%d bytes; want 1..253 (one RADIUS attribute)", len(s))
			}
			e.NASIdentifier = s
		}
	}
	if v := m["nas_ip"]; v != nil {
		if a, ok := d.addr(v, "eap_radius.nas_ip"); ok {
			if !a.IsGlobalUnicast() && !a.IsPrivate() && !a.IsLoopback() {
				d.errorf(v, "eap_radius.nas_ip", "%v; want the gateway's own unicast address, as the server knows it", a)
			}
			e.NASIP = a
		}
	}
	if v := m["retransmit_timeout"]; v != nil {
		if t, ok := d.duration(v, "eap_radius.retransmit_timeout"); ok {
			if t < 10*time.Millisecond || t > time.Minute {
				d.errorf(v, "eap_radius.retransmit_timeout", "%v; want 10ms..60s", t)
			}
			e.RetransmitTimeout = t
		}
	}
	if v := m["retransmit_base"]; v != nil {
		if s, ok := d.scalar(v, "eap_radius.retransmit_base", "a number from 1 to 4"); ok {
			f, err := strconv.ParseFloat(s, 64)
			if err != nil || f < 1 || f > 4 {
				d.errorf(v, "eap_radius.retransmit_base", "%q; want a number from 1 to 4 (each wait is the last times this)", s)
			}
			e.RetransmitBase = f
		}
	}
	if v := m["retransmit_tries"]; v != nil {
		if t, ok := d.uint(v, "eap_radius.retransmit_tries", 1, maxRetransmitTries); ok {
			e.RetransmitTries = int(t)
		}
	}
	if len(d.errs) == before {
		ic.EAPRADIUS = e
	}
}

// radiusServers decodes eap_radius.servers.
func (d *decoder) radiusServers(n *yaml.Node, e *EAPRADIUS) {
	items, ok := d.list(n, "eap_radius.servers")
	if !ok {
		return
	}
	names := map[string]string{}
	for i, it := range items {
		f := index("eap_radius.servers", i)
		m, ok := d.fields(it, f, "name", "address", "acct_port", "secret", "secret_file")
		if !ok {
			continue
		}
		s := RADIUSServer{Line: it.Line}
		if v := m["address"]; v != nil {
			s.Address, s.AcctAddress = d.radiusAddress(v, join(f, "address"), m["acct_port"], join(f, "acct_port"))
		} else {
			d.errorf(it, join(f, "address"), "missing; want host:port (the port defaults to 1812)")
		}
		s.Name = s.Address
		if v := m["name"]; v != nil {
			s.Name = d.uniqueName(it, v, f, names, "")
		}
		switch sv, fv := m["secret"], m["secret_file"]; {
		case sv != nil && fv != nil:
			d.errorf(fv, join(f, "secret_file"), "given together with secret; use one")
		case fv != nil:
			s.Secret, ok = d.secretFile(fv, join(f, "secret_file"))
		case sv != nil:
			var text string
			if text, ok = d.str(sv, join(f, "secret")); ok {
				s.Secret, ok = d.secretValue(sv, join(f, "secret"), []byte(text))
			}
		default:
			d.errorf(it, join(f, "secret_file"), "missing; want secret_file: (or secret:), the shared secret")
		}
		if s.Secret != nil && len(s.Secret) < minRADIUSSecret {
			d.warnf(it, join(f, "secret"), "%d bytes; RFC 2865 §3 asks at least 16, and a short secret can be guessed from one captured Access-Request", len(s.Secret))
		}
		e.Servers = append(e.Servers, s)
	}
}

// radiusAddress decodes a server's host[:port] and its acct_port into
// the authentication and accounting addresses.
func (d *decoder) radiusAddress(v *yaml.Node, field string, acct *yaml.Node, acctField string) (string, string) {
	s, ok := d.str(v, field)
	if !ok {
		return "", ""
	}
	host, port := s, strconv.Itoa(defaultRADIUSAuthPort)
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		d.errorf(v, field, "port %q is not 1..65535", port)
		return "", ""
	}
	if host == "" || (net.ParseIP(host) == nil && !validHostname(host)) {
		d.errorf(v, field, "%q: want an IP address or a host name, with :port or without (1812)", s)
		return "", ""
	}
	acctPort := uint64(defaultRADIUSAcctPort)
	if acct != nil {
		if p, ok := d.uint(acct, acctField, 1, 65535); ok {
			acctPort = p
		}
	}
	return net.JoinHostPort(host, port), net.JoinHostPort(host, strconv.FormatUint(acctPort, 10))
}

// validHostname reports whether s is a DNS name (RFC 1123 labels).
func validHostname(s string) bool {
	return checkDomain(s) == nil
}

// eapUsers checks that connection cn, item it at f, has someone to
// check its EAP users: eap secrets, or for eap-radius the servers; and,
// as an EAP client, its password (or certificate, eap-tls) and a gateway
// proving itself by certificate or by a mutual method alone (remote auth
// eap); and, as a gateway that proves itself by EAP alone (local auth
// eap, RFC 5998), a mutual method and what EAP-TLS proves us with.
func (d *decoder) eapUsers(it *yaml.Node, f string, cn *Connection, ic *IKEConfig) bool {
	if a := cn.Local.Auth; a.IsEAP() {
		id := cn.Local.EAPID
		if id == "" {
			id = cn.Local.ID
		}
		switch _, ok := ic.EAPSecret(id); {
		case cn.Remote.Auth != ike.AuthPubkey && cn.Remote.Auth != ike.AuthEAPOnly:
			d.errorf(it, join(f, "remote.auth"), "%s: local auth %s needs remote auth pubkey: the gateway proves itself with its certificate before we prove the password (RFC 7296 §2.16); or eap, by a mutual method alone", cn.Remote.Auth, a)
			return false
		case cn.Remote.Auth == ike.AuthEAPOnly && !a.Mutual():
			d.errorf(it, join(f, "remote.auth"), "eap: EAP-only authentication needs a method that proves the gateway (eap-mschapv2, eap-tls); local auth %s does not", a)
			return false
		case a == ike.AuthEAPTLS && len(cn.Remote.CACerts) == 0:
			d.errorf(it, join(f, "remote.cacerts"), "missing; local auth eap-tls needs the trust anchors of the gateway's TLS certificate")
			return false
		case !ok && a != ike.AuthEAPTLS:
			d.errorf(it, join(f, "local.auth"), "%s, and no item of secrets of type eap has ids [%s]: no password for EAP identity %q", a, id, id)
			return false
		}
	}
	if cn.Local.Auth == ike.AuthEAPOnly {
		switch {
		case !cn.Remote.Auth.Mutual():
			d.errorf(it, join(f, "remote.auth"), "%s: local auth eap (EAP-only, RFC 5998) needs a method that proves us to the client: eap-mschapv2 or eap-tls", cn.Remote.Auth)
			return false
		case cn.Remote.Auth == ike.AuthEAPTLS && (cn.Local.Cert == "" || cn.Local.Key == ""):
			d.errorf(it, join(f, "local.cert"), "missing; local auth eap with remote auth eap-tls needs cert: and key:, which prove us inside EAP-TLS")
			return false
		}
	}
	switch a := cn.Remote.Auth; {
	case a == ike.AuthEAPRADIUS && ic.EAPRADIUS == nil:
		d.errorf(it, join(f, "remote.auth"), "eap-radius, and no eap_radius: section: no server to relay the EAP to")
		return false
	case a.IsEAP() && a != ike.AuthEAPRADIUS && a != ike.AuthEAPTLS && !slices.ContainsFunc(ic.Secrets, func(s Secret) bool { return s.Type == SecretEAP }):
		d.errorf(it, join(f, "remote.auth"), "%s, and no item of secrets has type eap: no user could log in", a)
		return false
	}
	return true
}

// eapRADIUSUsed warns when eap_radius: (n) is there and no connection
// relays to it.
func (d *decoder) eapRADIUSUsed(n *yaml.Node, ic *IKEConfig) {
	if ic.EAPRADIUS != nil && !slices.ContainsFunc(ic.Connections, func(cn Connection) bool { return cn.Remote.Auth == ike.AuthEAPRADIUS }) {
		d.warnf(n, "eap_radius", "no connection has remote auth eap-radius: the servers are not asked")
	}
}

// wipe zeroes the servers' secrets; nil does nothing.
func (e *EAPRADIUS) wipe() {
	if e == nil {
		return
	}
	for i := range e.Servers {
		clear(e.Servers[i].Secret)
	}
}

// redacted returns a copy of e without the secrets; nil for nil.
func (e *EAPRADIUS) redacted() *EAPRADIUS {
	if e == nil {
		return nil
	}
	r := *e
	r.Servers = append([]RADIUSServer(nil), e.Servers...)
	for i := range r.Servers {
		r.Servers[i].Secret = nil
	}
	return &r
}
