package profile

import (
	"bytes"
	"crypto/x509"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/internal/printable"
)

// Options says whose profile to write, for which connection.
type Options struct {
	// Connection is the name of the gateway's connection the user
	// connects to; User the user's identity (the IKE identity, or the
	// EAP identity with EAP), as ike.ParseIdentity reads it.
	Connection, User string
	// Address is where clients reach the gateway; empty: the
	// connection's first local_addrs, else its local.id when that is a
	// DNS name.
	Address string
	// P12 is the user's certificate and key as PKCS#12, which an Apple
	// profile carries for certificate authentication.
	P12 []byte
	// CA is the root of the gateway's certificate when the config has
	// it nowhere (a gateway of EAP users has no remote.cacerts, and its
	// certificate file often holds the certificate alone).
	CA *x509.Certificate
}

// File is one file of a profile: its name (a path relative to where the
// profile is written) and its bytes.
type File struct {
	Name string
	Data []byte
}

// gateway is what every profile says, read from one connection.
type gateway struct {
	conn    *config.Connection
	child   *config.Child // the first: the one a client brings up
	address string
	// id is the gateway's identity (local.id, or its certificate's
	// subject when local.id is empty).
	id ike.Identity
	// ca is the root that the gateway's certificate chains to, nil with
	// a pre-shared key.
	ca   *x509.Certificate
	user ike.Identity
	// userText is the user as given.
	userText string
	psk      config.Key
	// vip4 and vip6: the connection hands out addresses of that family
	// (its pools), which the client asks for.
	vip4, vip6 bool
}

// newGateway reads o's connection from c; an error names what is missing.
func newGateway(c *config.IKEConfig, o Options) (*gateway, error) {
	var conn *config.Connection
	var names []string
	for i := range c.Connections {
		names = append(names, c.Connections[i].Name)
		if c.Connections[i].Name == o.Connection {
			conn = &c.Connections[i]
		}
	}
	if conn == nil {
		return nil, fmt.Errorf("no connection %q in the config (connections: %s)", o.Connection, strings.Join(names, ", "))
	}
	g := &gateway{conn: conn, userText: o.User}
	errorf := func(format string, args ...any) error {
		return fmt.Errorf("connection %s: %s", conn.Name, fmt.Sprintf(format, args...))
	}
	if len(conn.Children) == 0 {
		return nil, errorf("no children: a client needs one to carry its traffic")
	}
	g.child = &conn.Children[0]
	user, err := ike.ParseIdentity(o.User)
	if err != nil || user.IsAny() {
		return nil, errorf("user %q is not an identity (want a name, user@domain or an address): %v", o.User, err)
	}
	g.user = user
	switch r := conn.Remote.Identity; {
	case conn.Remote.Auth.IsEAP():
		// The user is the EAP identity; the IKE identity is the
		// client's own (an address, unless set).
		if e := conn.Remote.EAPID; e != "" && e != o.User {
			return nil, errorf("remote.eap_id is %s, which user %s is not: this connection serves that one user", printable.Escape(e), user)
		}
	case !r.IsAny() && !r.Equal(user):
		return nil, errorf("remote.id is %s, which user %s is not: this connection serves that one peer", r, user)
	}
	if g.address, err = address(conn, o.Address); err != nil {
		return nil, errorf("%v", err)
	}
	g.id = conn.Local.Identity
	if g.id.IsAny() && len(conn.Local.Certs) > 0 {
		g.id = ike.NewIdentity(message.IDDN, conn.Local.Certs[0].RawSubject)
	}
	switch {
	case conn.Local.Auth == ike.AuthPubkey:
		if g.ca, err = root(conn, o.CA); err != nil {
			return nil, errorf("%v", err)
		}
	case conn.Local.Auth == ike.AuthPSK:
		g.psk = conn.PSK
	default:
		return nil, errorf("local.auth %s: the gateway proves itself with a certificate (pubkey) or a pre-shared key (psk)", conn.Local.Auth)
	}
	if conn.Remote.Auth == ike.AuthPSK {
		g.psk = conn.PSK
	}
	for _, name := range conn.Pools {
		for _, p := range c.Pools {
			if p.Name == name {
				g.vip6 = g.vip6 || p.Addrs.Is6()
				g.vip4 = g.vip4 || !p.Addrs.Is6()
			}
		}
	}
	return g, nil
}

// address returns where clients reach the gateway: override, else the
// connection's first local address, else its identity when that is a
// DNS name.
func address(conn *config.Connection, override string) (string, error) {
	if override != "" {
		if !printable.IsPrintable(override) || strings.ContainsAny(override, " \t,\"'") {
			return "", fmt.Errorf("address %s is no host name or IP address", printable.Escape(override))
		}
		return override, nil
	}
	for _, a := range conn.LocalAddrs {
		if a.IsValid() && !a.IsUnspecified() {
			return a.String(), nil
		}
	}
	if id := conn.Local.Identity; id.Type() == message.IDFQDN {
		return string(id.Data()), nil
	}
	return "", fmt.Errorf("no address that clients reach the gateway at: set local_addrs, a local.id that is a DNS name, or --address")
}

// root returns the CA that the gateway's certificate chain ends at: the
// chain's last certificate when it signed itself, else the trust anchor
// of remote.cacerts, or given (--ca), that signed it.
func root(conn *config.Connection, given *x509.Certificate) (*x509.Certificate, error) {
	chain := conn.Local.Certs
	if len(chain) == 0 {
		return nil, fmt.Errorf("local.auth pubkey without a certificate")
	}
	last := chain[len(chain)-1]
	if bytes.Equal(last.RawIssuer, last.RawSubject) && last.CheckSignatureFrom(last) == nil {
		return last, nil
	}
	cas := conn.Remote.CACertList
	if given != nil {
		cas = append([]*x509.Certificate{given}, cas...)
	}
	for _, ca := range cas {
		if bytes.Equal(last.RawIssuer, ca.RawSubject) && last.CheckSignatureFrom(ca) == nil {
			return ca, nil
		}
	}
	if given != nil {
		return nil, fmt.Errorf("the CA given (%s) did not issue local.cert (issuer %s)", given.Subject, last.Issuer)
	}
	return nil, fmt.Errorf("the issuer of local.cert (%s) is in neither local.cert's file nor remote.cacerts; clients need it to trust the gateway: append it to local.cert's file, or give it with --ca FILE", last.Issuer)
}

// vips returns the virtual IPs a client asks for, as swanctl writes
// them: 0.0.0.0 and :: for the families the connection's pools have.
func (g *gateway) vips() []netip.Addr {
	var v []netip.Addr
	if g.vip4 {
		v = append(v, netip.IPv4Unspecified())
	}
	if g.vip6 {
		v = append(v, netip.IPv6Unspecified())
	}
	return v
}

// serverAuth checks that the gateway's certificate may serve client
// (Windows, Apple) at all: both refuse one without the serverAuth
// extended key usage (strongSwan's pages on Windows' certificate
// requirements and on Apple clients).
func (g *gateway) serverAuth(client string) error {
	if g.ca == nil {
		return nil
	}
	leaf := g.conn.Local.Certs[0]
	if !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		return fmt.Errorf("the gateway's certificate (%s) has no serverAuth extended key usage, without which %s refuses it: issue it with one (pki --flag serverAuth, openssl extendedKeyUsage = serverAuth)", leaf.Subject, client)
	}
	return nil
}
