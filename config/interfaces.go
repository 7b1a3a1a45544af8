package config

import (
	"fmt"
	"math"
	"net/netip"
	"strings"

	"go.yaml.in/yaml/v3"
)

func (d *decoder) interfaces(n *yaml.Node, c *Config) {
	items, ok := d.list(n, "interfaces")
	if !ok {
		return
	}
	names := map[string]string{} // name → field of its first use
	ids := map[uint32]string{}   // if_id → field
	routes := map[netip.Prefix]string{}
	for i, it := range items {
		f := index("interfaces", i)
		m, ok := d.fields(it, f, "name", "if_id", "mtu", "addresses", "routes", "queues", "table", "txqueuelen", "rule_priority")
		if !ok {
			continue
		}
		ifc := Interface{MTU: DefaultMTU, Queues: DefaultQueues, TxQueueLen: DefaultTxQueueLen, Line: it.Line}
		good := true
		if v := m["name"]; v == nil {
			d.errorf(it, join(f, "name"), "missing")
			good = false
		} else if s, ok := d.str(v, join(f, "name")); ok {
			if msg := checkIfName(s); msg != "" {
				d.errorf(v, join(f, "name"), "%s", msg)
			} else if prev, dup := names[s]; dup {
				d.errorf(v, join(f, "name"), "%q is already the name of %s", s, prev)
			} else {
				names[s] = f
			}
			ifc.Name = s
		}
		if v := m["if_id"]; v == nil {
			d.errorf(it, join(f, "if_id"), "missing; want a non-zero number")
			good = false
		} else if id, ok := d.uint(v, join(f, "if_id"), 1, math.MaxUint32); ok {
			if prev, dup := ids[uint32(id)]; dup {
				d.errorf(v, join(f, "if_id"), "%d is already the if_id of %s", id, prev)
			} else {
				ids[uint32(id)] = f
			}
			ifc.IfID = uint32(id)
		} else {
			good = false
		}
		var mtuNode *yaml.Node
		if v := m["mtu"]; v != nil {
			mtuNode = v
			mtu, _ := d.uint(v, join(f, "mtu"), MinMTU, MaxMTU)
			ifc.MTU = int(mtu)
		}
		if v := m["queues"]; v != nil {
			q, _ := d.uint(v, join(f, "queues"), 1, MaxQueues)
			ifc.Queues = int(q)
		}
		if v := m["txqueuelen"]; v != nil {
			q, _ := d.uint(v, join(f, "txqueuelen"), 1, MaxTxQueueLen)
			ifc.TxQueueLen = int(q)
		}
		if v := m["addresses"]; v != nil {
			ifc.Addresses = d.prefixes(v, join(f, "addresses"), true)
		}
		if v := m["table"]; v != nil {
			if t, ok := d.uint(v, join(f, "table"), 1, math.MaxUint32); ok {
				switch t {
				case 253, 255:
					d.errorf(v, join(f, "table"), "%d is the kernel's %s table; want main (254) or a table of your own", t, map[uint64]string{253: "default", 255: "local"}[t])
				case 254:
					// main, the default
				default:
					ifc.Table = uint32(t)
				}
			}
		}
		if v := m["rule_priority"]; v != nil {
			d.rulePriority(v, join(f, "rule_priority"), &ifc) // routes.go
		}
		if v := m["routes"]; v != nil {
			field := join(f, "routes")
			items, _ := d.list(v, field)
			for j, rn := range items {
				p, ok := d.prefix(rn, index(field, j), false)
				switch {
				case !ok:
				case p.Masked() != p:
					d.errorf(rn, index(field, j), "%s has host bits set; did you mean %s?", p, p.Masked())
				case routes[p] != "":
					d.errorf(rn, index(field, j), "%s is already routed into %s", p, routes[p])
				default:
					routes[p] = f
					ifc.Routes = append(ifc.Routes, p)
				}
			}
		}
		if ifc.MTU != 0 && ifc.MTU < MinMTU6 && (hasIPv6(ifc.Addresses) || hasIPv6(ifc.Routes)) {
			at := mtuNode
			if at == nil {
				at = it
			}
			d.errorf(at, join(f, "mtu"), "%d is below %d, the minimum for IPv6, and the interface has IPv6 addresses or routes", ifc.MTU, MinMTU6)
		}
		if good {
			c.Interfaces = append(c.Interfaces, ifc)
		}
	}
}

// checkIfName applies Linux's rules for interface names (dev_valid_name).
func checkIfName(s string) string {
	switch {
	case s == "":
		return "empty"
	case len(s) > 15:
		return fmt.Sprintf("%q is longer than 15 bytes", s)
	case s == "." || s == "..":
		return fmt.Sprintf("%q is not a valid interface name", s)
	case strings.ContainsAny(s, "/: \t\n\r\v\f"):
		return fmt.Sprintf("%q contains '/', ':' or white space", s)
	}
	return ""
}

func hasIPv6(ps []netip.Prefix) bool {
	for _, p := range ps {
		if p.Addr().Is6() {
			return true
		}
	}
	return false
}
