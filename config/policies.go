package config

import (
	"go.yaml.in/yaml/v3"

	"github.com/ipsecd/ipsecd/sa"
)

func (d *decoder) policies(n *yaml.Node, c *Config, ifaces map[uint32]bool) {
	items, ok := d.list(n, "policies")
	if !ok {
		return
	}
	seen := map[sa.Policy]string{}
	for i, it := range items {
		base := index("policies", i)
		m, ok := d.fields(it, base, "dir", "if_id", "src", "dst", "action")
		if !ok {
			continue
		}
		fn := newFieldNodes(base, it)
		before := len(d.errs)
		p := sa.Policy{Action: sa.ActionAllow}
		fn.field(m, "dir", "", func(v *yaml.Node, f string) bool { return d.direction(v, f, &p.Dir) })
		fn.field(m, "if_id", "", func(v *yaml.Node, f string) bool { return d.ifID(v, f, &p.IfID) })
		fn.field(m, "action", "", func(v *yaml.Node, f string) bool {
			a, ok := d.oneOf(v, f, "allow", "block")
			p.Action, _ = sa.ParseAction(a)
			return ok
		})
		fn.field(m, "src", "", func(v *yaml.Node, f string) bool { p.Selector.Src, ok = d.prefix(v, f, false); return ok })
		fn.field(m, "dst", "", func(v *yaml.Node, f string) bool { p.Selector.Dst, ok = d.prefix(v, f, false); return ok })
		d.reportSA(fn, sa.CheckPolicy(&p))
		if ifaces != nil && p.IfID != 0 && !ifaces[p.IfID] && !fn.bad["if_id"] {
			d.errorf(fn.nodes["if_id"], join(base, "if_id"), "no interface has if_id %d", p.IfID)
		}
		if len(d.errs) > before {
			continue
		}
		if prev, dup := seen[p]; dup {
			d.errorf(it, base, "same as %s", prev)
			continue
		}
		seen[p] = base
		c.Policies = append(c.Policies, p)
	}
}
