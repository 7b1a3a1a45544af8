package ike

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/ipsecd/ipsecd/ike/message"
)

// Configuration payloads, the initiator's side (RFC 7296 §3.15): a road
// warrior with Config.VIPs asks for them in its IKE_AUTH request, with
// the DNS servers of each family, and takes what the CFG_REPLY gives:
// its addresses (LocalVirtualIPs), the DNS servers and domains
// (Configuration). The gateway narrows the child's local selectors to
// the addresses it gave.

// Configuration is what a gateway's CFG_REPLY gave us.
type Configuration struct {
	VirtualIPs []netip.Addr
	DNS        []netip.Addr
	Subnets    []netip.Prefix // INTERNAL_IP4/6_SUBNET: the networks behind the gateway
	Domains    []string       // RFC 8598's INTERNAL_DNS_DOMAIN
}

// LocalVirtualIPs returns the addresses the gateway gave us (initiator
// with Config.VIPs), none before or without.
func (s *SA) LocalVirtualIPs() []netip.Addr { return s.cfgReply.VirtualIPs }

// Configuration returns what the gateway's CFG_REPLY gave us.
func (s *SA) Configuration() Configuration { return s.cfgReply }

// cfgRequest is our CFG_REQUEST: an address of each VIP's family (empty
// for 0.0.0.0 or ::, else the address wanted) and that family's DNS
// servers; nil without VIPs.
func (c *Config) cfgRequest() []message.Payload {
	if len(c.VIPs) == 0 {
		return nil
	}
	var attrs []message.CPAttribute
	for _, v := range c.VIPs {
		t, dns := message.InternalIP4Address, message.InternalIP4DNS
		if v.Is6() {
			t, dns = message.InternalIP6Address, message.InternalIP6DNS
		}
		a := message.CPAttribute{Type: t}
		if !v.IsUnspecified() {
			a = message.AddrAttribute(t, v)
		}
		attrs = append(attrs, a)
		if !slices.ContainsFunc(attrs, func(b message.CPAttribute) bool { return b.Type == dns }) {
			attrs = append(attrs, message.CPAttribute{Type: dns})
		}
	}
	return []message.Payload{{Type: message.TypeCP, Body: message.AppendCP(nil, message.CFGRequest, attrs)}}
}

// takeCFGReply reads the gateway's CFG_REPLY among ps into s.cfgReply.
// Asking for virtual IPs and getting none fails the child: its local
// selectors could be none of ours.
func (s *SA) takeCFGReply(ps []message.Payload) error {
	if len(s.cfg.VIPs) == 0 {
		return nil
	}
	cp := message.CP(message.Get(ps, message.TypeCP))
	attrs, err := cp.Attributes()
	if err != nil || cp.Type() != message.CFGReply {
		return fmt.Errorf("%w: we asked for virtual IPs and the gateway's answer has no CFG_REPLY", ErrChildFailed)
	}
	var r Configuration
	for _, a := range attrs {
		switch a.Type {
		case message.InternalIP4Address, message.InternalIP6Address:
			if v, ok := a.Addr(); ok && !v.IsUnspecified() && !slices.Contains(r.VirtualIPs, v) {
				r.VirtualIPs = append(r.VirtualIPs, v)
			}
		case message.InternalIP4DNS, message.InternalIP6DNS:
			if v, ok := a.Addr(); ok && !slices.Contains(r.DNS, v) {
				r.DNS = append(r.DNS, v)
			}
		case message.InternalIP4Subnet, message.InternalIP6Subnet:
			if p, ok := a.Prefix(); ok {
				r.Subnets = append(r.Subnets, p.Masked())
			}
		case message.InternalDNSDomain:
			if d := string(a.Value); d != "" && len(r.Domains) < 16 {
				r.Domains = append(r.Domains, d)
			}
		}
	}
	if len(r.VirtualIPs) == 0 {
		return fmt.Errorf("%w: the gateway gave no virtual IP", ErrChildFailed)
	}
	s.cfgReply = r
	return nil
}
