package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/ipsecd/ipsecd/internal/dnstest"
)

// demoRADNS is the DNS server the gateway's pool names: behind the
// gateway, in its child's local_ts, where the road warrior reaches it
// through the tunnel. The gateway's ipsec1 holds it, standing for a DNS
// server of the network behind it, as 10.4.0.1 stands for a host there.
const demoRADNS = "10.4.0.53"

// demoRADNSName is the name that DNS server answers, with the gateway's
// inner address (the host behind it).
const demoRADNSName = "intranet.corp.example"

// demoRAServeDNS answers DNS queries at demoRADNS in the gateway's
// namespace (internal/dnstest) until stop is called. The gateway must be
// up: its ipsec1 holds the address.
func demoRAServeDNS(gw *demoEndpoint) (stop func(), err error) {
	var c net.PacketConn
	if err := inNetns(gw.NS, func() (err error) {
		c, err = net.ListenPacket("udp", net.JoinHostPort(demoRADNS, "53"))
		return err
	}); err != nil {
		return nil, fmt.Errorf("the DNS server %s in the gateway's namespace: %w", demoRADNS, err)
	}
	go dnstest.Serve(c, map[string]netip.Addr{demoRADNSName + ".": netip.MustParseAddr(gw.Inner)})
	return func() { c.Close() }, nil
}

// demoRAResolve looks demoRADNSName up from the road warrior's
// namespace, asking server (the DNS server its gateway named) over UDP,
// which the tunnel carries.
func demoRAResolve(ctx context.Context, rw *demoEndpoint, server string) ([]netip.Addr, error) {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (c net.Conn, err error) {
		err = inNetns(rw.NS, func() (err error) {
			var d net.Dialer
			c, err = d.DialContext(ctx, "udp", net.JoinHostPort(server, "53"))
			return err
		})
		return c, err
	}}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	addrs, err := r.LookupNetIP(ctx, "ip4", demoRADNSName)
	if err != nil {
		return nil, fmt.Errorf("resolving %s through the DNS server %s from the %s: %w", demoRADNSName, server, rw.Name, err)
	}
	return addrs, nil
}
