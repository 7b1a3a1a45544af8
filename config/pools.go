package config

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ipsecd/ipsecd/internal/hint"
	"github.com/ipsecd/ipsecd/pool"
)

// Pool is one item of pools: (swanctl's pools.<name>): the virtual IP
// addresses a gateway hands its remote-access clients, and what it tells
// them with each (RFC 7296 §3.15's configuration attributes).
type Pool struct {
	Name  string
	Addrs pool.Range // a prefix or a range
	// DNS are the DNS servers (INTERNAL_IP4_DNS, INTERNAL_IP6_DNS).
	DNS []netip.Addr
	// SplitInclude are the networks behind the gateway
	// (INTERNAL_IP4_SUBNET, INTERNAL_IP6_SUBNET); clients may ignore
	// them, and IKEv2 splits the tunnel by narrowing the child's TS.
	SplitInclude []netip.Prefix
	// DNSDomains are the domains whose names the DNS servers resolve
	// (INTERNAL_DNS_DOMAIN, RFC 8598).
	DNSDomains []string
	// RADIUS: a client that RADIUS assigned an address (its Access-Accept's
	// Framed-IP-Address) gets that one, with this pool's DNS, subnets
	// and domains; one that it assigned none gets one of Addrs.
	RADIUS bool
	Line   int
}

// poolName is what a pool may be called: it names a metric's label, a
// column of `ipsecd pool list` and a key of the leases file.
var poolName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// dnsLabel is one label of a domain name (RFC 1035 §2.3.1, RFC 1123 §2.1).
var dnsLabel = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)

// pools decodes pools: into ic.Pools; a pool with errors is left out.
func (d *decoder) pools(n *yaml.Node, ic *IKEConfig) {
	items, ok := d.list(n, "pools")
	if !ok {
		return
	}
	names := map[string]string{}
	for i, it := range items {
		f := index("pools", i)
		m, ok := d.fields(it, f, "name", "addrs", "dns", "split_include", "dns_domains", "radius")
		if !ok {
			continue
		}
		before := len(d.errs)
		p := Pool{Line: it.Line}
		p.Name = d.uniqueName(it, m["name"], f, names, "")
		if p.Name != "" && !poolName.MatchString(p.Name) {
			d.errorf(m["name"], join(f, "name"), "%q: want letters, digits, '.', '_' and '-', starting with a letter or digit, at most 64", p.Name)
		}
		if v := m["addrs"]; v == nil {
			d.errorf(it, join(f, "addrs"), "missing; want a prefix (10.3.0.0/24) or a range (10.3.0.10-10.3.0.200)")
		} else if s, ok := d.str(v, join(f, "addrs")); ok {
			r, err := pool.ParseRange(s)
			if err != nil {
				d.errorf(v, join(f, "addrs"), "%s", strings.TrimPrefix(err.Error(), pool.ErrBadRange.Error()+": "))
			}
			p.Addrs = r
		}
		if v := m["dns"]; v != nil {
			items, _ := d.list(v, join(f, "dns"))
			for j, an := range items {
				if a, ok := d.addr(an, index(join(f, "dns"), j)); ok {
					p.DNS = append(p.DNS, a)
				}
			}
		}
		if v := m["split_include"]; v != nil {
			for j, sp := range d.prefixes(v, join(f, "split_include"), false) {
				if sp.Masked() != sp {
					d.errorf(v.Content[j], index(join(f, "split_include"), j), "%s has host bits set; did you mean %s?", sp, sp.Masked())
				}
				p.SplitInclude = append(p.SplitInclude, sp)
			}
		}
		if v := m["dns_domains"]; v != nil {
			items, _ := d.list(v, join(f, "dns_domains"))
			for j, dn := range items {
				if s, ok := d.str(dn, index(join(f, "dns_domains"), j)); ok {
					if err := checkDomain(s); err != nil {
						d.errorf(dn, index(join(f, "dns_domains"), j), "%q: %v", s, err)
					}
					p.DNSDomains = append(p.DNSDomains, strings.TrimSuffix(s, "."))
				}
			}
		}
		if v := m["radius"]; v != nil {
			if on, ok := d.bool(v, join(f, "radius")); ok && on {
				if ic.EAPRADIUS == nil {
					d.errorf(v, join(f, "radius"), "true needs eap_radius: (the servers whose Access-Accept assigns the address)")
				}
				p.RADIUS = on
			}
		}
		if len(d.errs) > before {
			continue
		}
		for _, q := range ic.Pools {
			if overlaps(p.Addrs, q.Addrs) {
				d.errorf(m["addrs"], join(f, "addrs"), "%s overlaps pool %s (%s): two clients could get one address", p.Addrs, q.Name, q.Addrs)
			}
		}
		if len(d.errs) == before {
			ic.Pools = append(ic.Pools, p)
		}
	}
}

// cgnat is RFC 6598's shared address space, private in practice.
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// unreachableDNS warns of a pool's DNS server that the clients of a
// connection using the pool cannot reach: a private address (or one of
// the pool's addrs) that no child's local_ts covers, so the client's
// query would leave the tunnel for a network where the server is not. A
// public server is reached outside the tunnel, and needs no local_ts.
// A DNS server in the pool's addrs is not refused: the pool never hands
// it out (PoolSet), and the gateway itself may hold it (its resolver on
// 10.3.0.1 of a pool 10.3.0.0/24, a child's local_ts 10.3.0.1/32), as
// strongSwan's pools allow.
func (d *decoder) unreachableDNS(ic *IKEConfig) {
	for i, cn := range ic.Connections {
		for j, name := range cn.Pools {
			pi := slices.IndexFunc(ic.Pools, func(p Pool) bool { return p.Name == name })
			if pi < 0 {
				continue // vici's, unknown yet
			}
			p := ic.Pools[pi]
			for k, a := range p.DNS {
				_, inPool := p.Addrs.Offset(a)
				if !inPool && !a.IsPrivate() && !cgnat.Contains(a) || childrenCover(cn.Children, a) {
					continue
				}
				w := fmt.Sprintf("%s: pool %s's DNS server %s (%s) is in no child's local_ts: its clients cannot reach it through the tunnel; give a DNS server behind the gateway, in a local_ts",
					index(join(index("connections", i), "pools"), j), p.Name, a, index(join(index("pools", pi), "dns"), k))
				if inPool {
					w += fmt.Sprintf(" (it is one of the pool's own addrs %s, which the pool never hands out)", p.Addrs)
				}
				d.warnings = append(d.warnings, w)
			}
		}
	}
}

// childrenCover reports whether a child's local_ts holds a.
func childrenCover(children []Child, a netip.Addr) bool {
	for _, ch := range children {
		for _, ts := range ch.LocalTS {
			if ts.Contains(a) {
				return true
			}
		}
	}
	return false
}

// overlaps reports whether ranges a and b share an address.
func overlaps(a, b pool.Range) bool {
	if a.Is6() != b.Is6() || a.Size == 0 || b.Size == 0 {
		return false
	}
	aLast, bLast := a.Addr(a.Size-1), b.Addr(b.Size-1)
	return !aLast.Less(b.First) && !bLast.Less(a.First)
}

// checkDomain checks a domain name as INTERNAL_DNS_DOMAIN carries it
// (RFC 8598 §4: a name in its presentation form, without a root label).
func checkDomain(s string) error {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return fmt.Errorf("want a domain name (corp.example) of 1 to 253 characters")
	}
	for _, l := range strings.Split(s, ".") {
		if !dnsLabel.MatchString(l) {
			return fmt.Errorf("label %q is not letters, digits and inner hyphens, of at most 63", l)
		}
	}
	return nil
}

// connectionPools decodes a connection's pools: names of pools: items.
func (d *decoder) connectionPools(n *yaml.Node, field string, ic *IKEConfig, poolErrs bool) []string {
	items, ok := d.list(n, field)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		d.errorf(n, field, "empty; want names of pools")
	}
	known := make([]string, len(ic.Pools))
	for i, p := range ic.Pools {
		known[i] = p.Name
	}
	var names []string
	for j, pn := range items {
		f := index(field, j)
		s, ok := d.str(pn, f)
		switch {
		case !ok:
		case slices.Contains(names, s):
			d.errorf(pn, f, "pool %q is named twice", s)
		case !slices.Contains(known, s) && d.externalPools:
			// A pool vici loads: until it is loaded, the connection's
			// clients get no address (and remote_ts dynamic admits none).
			d.warnings = append(d.warnings, fmt.Sprintf("%s: no pool is named %q in pools:; it must be loaded over vici (load-pool) before clients get addresses from it", f, s))
			names = append(names, s)
		case !slices.Contains(known, s) && !poolErrs:
			if c := hint.Closest(s, known); c != "" {
				d.errorf(pn, f, "no pool is named %q; did you mean %s?", s, c)
			} else {
				d.errorf(pn, f, "no pool is named %q; the pools are %s", s, orNone(known))
			}
		default:
			names = append(names, s)
		}
	}
	return names
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none (pools: is empty or missing)"
	}
	return hint.OrList(names)
}

// vips decodes a connection's vips: the virtual IPs the client asks its
// gateway for, 0.0.0.0 or :: for any of that family.
func (d *decoder) vips(n *yaml.Node, field string) []netip.Addr {
	items, ok := d.list(n, field)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		d.errorf(n, field, "empty; want 0.0.0.0 and/or :: (any address of that family) or the addresses to ask for")
	}
	var as []netip.Addr
	for j, an := range items {
		if a, ok := d.addr(an, index(field, j)); ok {
			if slices.Contains(as, a) {
				d.errorf(an, index(field, j), "%s is given twice", a)
				continue
			}
			as = append(as, a)
		}
	}
	return as
}

// PoolSet returns the pools of c as package pool hands out their
// addresses (an empty set without pools); a pool's DNS servers in its
// addrs are never handed out.
func (c *IKEConfig) PoolSet() *pool.Set {
	ps := make([]*pool.Pool, len(c.Pools))
	for i, p := range c.Pools {
		ps[i] = pool.New(p.Name, p.Addrs, p.DNS...) // never a client's address
	}
	s, err := pool.NewSet(ps...)
	if err != nil {
		panic("config: " + err.Error()) // names are unique: the decoder saw to it
	}
	return s
}

// pendingPools returns cn to be checked as the engine will run it: a
// child whose remote_ts is dynamic alone, of pools vici has yet to load
// (externalPools), stands for their addresses as if loaded. Until they
// are, the engine refuses the child (ike.Config.Validate: no remote_ts).
func pendingPools(cn Connection) Connection {
	cloned := false
	for i, ch := range cn.Children {
		if ch.RemoteDynamic && len(ch.RemoteTS) == 0 {
			if !cloned {
				cn.Children, cloned = slices.Clone(cn.Children), true
			}
			cn.Children[i].RemoteTS = []netip.Prefix{netip.PrefixFrom(netip.IPv4Unspecified(), 32)}
		}
	}
	return cn
}

// Overlaps reports whether p and q share an address.
func (p *Pool) Overlaps(q *Pool) bool { return overlaps(p.Addrs, q.Addrs) }

// AddPools returns c with the pools of extra that c lacks by name (those
// vici loaded): its connections may name them (ParseMem, or a file with
// vici:), and remote_ts dynamic of a connection that names one admits
// its addresses too. c is left as it is.
func (c *IKEConfig) AddPools(extra []Pool) *IKEConfig {
	out := *c
	out.Pools = slices.Clone(c.Pools)
	var added []Pool
	for _, p := range extra {
		if c.Pool(p.Name) == nil {
			out.Pools = append(out.Pools, p)
			added = append(added, p)
		}
	}
	if len(added) == 0 {
		return &out
	}
	byName := IKEConfig{Pools: added}
	out.Connections = slices.Clone(c.Connections)
	for i := range out.Connections {
		cn := &out.Connections[i]
		dyn := byName.dynamicPrefixes(cn.Pools)
		if len(dyn) == 0 {
			continue
		}
		cn.Children = slices.Clone(cn.Children)
		for j := range cn.Children {
			if ch := &cn.Children[j]; ch.RemoteDynamic {
				ch.RemoteTS = append(slices.Clone(ch.RemoteTS), dyn...)
			}
		}
	}
	return &out
}

// Pool returns the pool named name, or nil.
func (c *IKEConfig) Pool(name string) *Pool {
	for i := range c.Pools {
		if c.Pools[i].Name == name {
			return &c.Pools[i]
		}
	}
	return nil
}

// anyOfFamilies returns 0.0.0.0/0 and ::/0 for the families of vips.
func anyOfFamilies(vips []netip.Addr) []netip.Prefix {
	var out []netip.Prefix
	for _, v := range vips {
		p := netip.MustParsePrefix("0.0.0.0/0")
		if v.Is6() {
			p = netip.MustParsePrefix("::/0")
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// dynamicPrefixes returns what remote_ts: [dynamic] stands for in a
// connection with pools: every address the pools hand out. Until IKE_AUTH
// carries configuration payloads, a child with dynamic admits all of
// them, not the one address a client was given.
func (c *IKEConfig) dynamicPrefixes(pools []string) []netip.Prefix {
	var ps []netip.Prefix
	for _, name := range pools {
		if p := c.Pool(name); p != nil {
			ps = append(ps, p.Addrs.Prefixes()...)
		}
	}
	return ps
}
