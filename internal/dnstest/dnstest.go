// Package dnstest is a DNS server for tests: it answers A and AAAA
// queries over UDP from a table of names, so that a resolver sent
// through a tunnel (a road warrior's, asking its gateway's DNS server)
// can be checked end to end, and for `ipsecd demo --remote-access`,
// whose road warrior resolves a name through its gateway's DNS server.
package dnstest

import (
	"net"
	"net/netip"

	"golang.org/x/net/dns/dnsmessage"
)

// Serve answers the queries that arrive on c until it is closed: an
// address of names (keyed by the fully qualified name, "host.example.")
// of the family asked for, NXDOMAIN for a name not in it, no answer for
// another type. Queries it cannot read are dropped.
func Serve(c net.PacketConn, names map[string]netip.Addr) {
	buf := make([]byte, 1500)
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			return
		}
		if out, ok := answer(buf[:n], names); ok {
			c.WriteTo(out, from)
		}
	}
}

// answer is the response to the query q.
func answer(q []byte, names map[string]netip.Addr) ([]byte, bool) {
	var m dnsmessage.Message
	if m.Unpack(q) != nil || m.Header.Response || len(m.Questions) != 1 {
		return nil, false
	}
	qu := m.Questions[0]
	m.Header.Response, m.Header.Authoritative = true, true
	m.Answers, m.Authorities, m.Additionals = nil, nil, nil
	a, known := names[qu.Name.String()]
	h := dnsmessage.ResourceHeader{Name: qu.Name, Type: qu.Type, Class: qu.Class, TTL: 60}
	switch {
	case !known:
		m.Header.RCode = dnsmessage.RCodeNameError
	case qu.Type == dnsmessage.TypeA && a.Is4():
		m.Answers = []dnsmessage.Resource{{Header: h, Body: &dnsmessage.AResource{A: a.As4()}}}
	case qu.Type == dnsmessage.TypeAAAA && a.Is6():
		m.Answers = []dnsmessage.Resource{{Header: h, Body: &dnsmessage.AAAAResource{AAAA: a.As16()}}}
	}
	out, err := m.Pack()
	return out, err == nil
}
