package config

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// A road warrior's routes (a connection with vips) follow the remote
// traffic selectors its children negotiate, into each child's interface
// and that interface's table. What is checked here: that the daemon's
// rule of a table (rule_priority) has a table to look up, and that no
// child routes its gateway's own address into the main table, where IKE
// and ESP to the gateway would follow it into the tunnel they carry.

// MaxRulePriority is the last priority before the main table's rule
// (32766), which a rule must come before to be consulted.
const MaxRulePriority = 32765

// rulePriority decodes an interface's rule_priority; the interface's
// table must be decoded already.
func (d *decoder) rulePriority(v *yaml.Node, field string, ifc *Interface) {
	p, ok := d.uint(v, field, 1, MaxRulePriority)
	switch {
	case !ok:
	case ifc.Table == 0:
		d.errorf(v, field, "needs the interface's table, a routing table of its own for the rule to look up (table: 220)")
	default:
		ifc.RulePriority = uint32(p)
	}
}

// roadWarriorRoutes refuses a child of a connection with vips whose
// remote_ts holds one of the connection's remote_addrs while its
// interface routes into the main table. It runs once everything else
// checked out, so that the indices of c's lists are the file's.
func (d *decoder) roadWarriorRoutes(c *Config) {
	tables := map[uint32]*Interface{}
	for i := range c.Interfaces {
		tables[c.Interfaces[i].IfID] = &c.Interfaces[i]
	}
	for i, cn := range c.Connections {
		if len(cn.VIPs) == 0 {
			continue
		}
		for j, ch := range cn.Children {
			ifc := tables[ch.IfID]
			if ifc == nil || ifc.Table != 0 {
				continue
			}
			for _, p := range ch.RemoteTS {
				for _, gw := range cn.RemoteAddrs {
					if !p.Contains(gw.Unmap()) {
						continue
					}
					d.errs = append(d.errs, &Error{File: d.file, Line: ch.Line, Field: fmt.Sprintf("connections[%d].children[%d].remote_ts", i, j),
						Msg: fmt.Sprintf("child %q routes %s, which holds the gateway %s, into interface %s's main table, where IKE and ESP to the gateway would enter the tunnel: give the interface a table of its own and a rule_priority (table: 220, rule_priority: 220)",
							ch.Name, p, gw, ifc.Name)})
				}
			}
		}
	}
}
