package stackike

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// Names through the tunnel: a road warrior asks the DNS servers its
// gateway gave (INTERNAL_IP4_DNS, INTERNAL_IP6_DNS), over the netstack and
// so inside the tunnel, never the host's: the company's names resolve as
// on a laptop on its VPN, and no name the program looks up leaks to the
// network it sits on.

// Resolver is a DNS resolver that asks the gateway's DNS servers (DNS)
// through the tunnel, from the virtual IP. It tries the servers in
// order; with none (yet) its lookups fail. Go's resolver reads the
// host's /etc/resolv.conf for its options (ndots, search, timeout), not
// for its servers.
func (n *Net) Resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		servers := n.DNS()
		if len(servers) == 0 {
			return nil, errors.New("stackike: the gateway named no DNS server")
		}
		var errs []error
		for _, s := range servers {
			c, err := n.Net.DialContext(ctx, network, netip.AddrPortFrom(s, 53).String())
			if err == nil {
				return c, nil
			}
			errs = append(errs, err)
		}
		return nil, errors.Join(errs...)
	}}
}

// DialContext is stack.Net's DialContext, which also takes a host name:
// the name is resolved by Resolver (the gateway's DNS servers, through
// the tunnel) and its addresses are tried in order. So an http.Transport
// whose DialContext this is fetches https://intranet.corp.example/ as a
// laptop on the VPN would.
func (n *Net) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return n.Net.DialContext(ctx, network, address)
	}
	family := "ip"
	switch network {
	case "tcp4", "udp4":
		family = "ip4"
	case "tcp6", "udp6":
		family = "ip6"
	}
	addrs, err := n.Resolver().LookupNetIP(ctx, family, host)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("stackike: resolve %s with the gateway's DNS servers: %w", host, err)}
	}
	var errs []error
	for _, a := range addrs {
		c, err := n.Net.DialContext(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// Dial is DialContext with the background context.
func (n *Net) Dial(network, address string) (net.Conn, error) {
	return n.DialContext(context.Background(), network, address)
}
