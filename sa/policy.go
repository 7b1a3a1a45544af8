package sa

import (
	"fmt"
	"net/netip"
	"slices"
)

// AddPolicy appends p to its interface's policies. A policy with the same
// direction, if_id and selector is refused with ErrExists.
func (d *SAD) AddPolicy(p Policy) error {
	if err := validatePolicy(p); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	old := d.table.Load()
	if f := old.ifaceOf(p.IfID); f != nil && f.hasPolicy(p) {
		return fmt.Errorf("policy %s if_id %d %v -> %v: %w", p.Dir, p.IfID, p.Selector.Src, p.Selector.Dst, ErrExists)
	}
	t := *old
	f := t.cloneIface(p.IfID)
	f.addPolicy(p)
	t.policies = append(slices.Clip(old.policies), p)
	d.table.Store(&t)
	return nil
}

// DeletePolicy removes the policy with p's direction, if_id and selector
// (its action is ignored). ErrNotFound if there is none.
func (d *SAD) DeletePolicy(p Policy) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	old := d.table.Load()
	same := func(q Policy) bool { return q.Dir == p.Dir && q.IfID == p.IfID && q.Selector == p.Selector }
	i := slices.IndexFunc(old.policies, same)
	if i < 0 {
		return fmt.Errorf("policy %s if_id %d %v -> %v: %w", p.Dir, p.IfID, p.Selector.Src, p.Selector.Dst, ErrNotFound)
	}
	t := *old
	t.policies = slices.Delete(slices.Clone(old.policies), i, i+1)
	f := t.cloneIface(p.IfID)
	f.outPol = slices.DeleteFunc(f.outPol, same)
	f.inPol = slices.DeleteFunc(f.inPol, same)
	d.table.Store(&t)
	return nil
}

func validatePolicy(p Policy) error {
	if p.Dir != DirIn && p.Dir != DirOut {
		return fieldErr("dir", "want in or out")
	}
	if p.Action != ActionAllow && p.Action != ActionBlock {
		return fieldErr("action", "want allow or block")
	}
	return validateSelector("src", p.Selector)
}

func (f *iface) hasPolicy(p Policy) bool {
	list := f.outPol
	if p.Dir == DirIn {
		list = f.inPol
	}
	return slices.ContainsFunc(list, func(q Policy) bool { return q.Selector == p.Selector })
}

func (f *iface) addPolicy(p Policy) {
	if p.Dir == DirIn {
		f.inPol = append(f.inPol, p)
	} else {
		f.outPol = append(f.outPol, p)
	}
}

// matchPrefix: an invalid prefix matches any address.
func matchPrefix(p netip.Prefix, a netip.Addr) bool {
	return !p.IsValid() || p.Contains(a)
}

func (sel *Selector) match(src, dst netip.Addr) bool {
	return matchPrefix(sel.Src, src) && matchPrefix(sel.Dst, dst)
}

// allowed applies a policy list: the first match decides, no match blocks.
func allowed(pols []Policy, src, dst netip.Addr) bool {
	for i := range pols {
		if pols[i].Selector.match(src, dst) {
			return pols[i].Action == ActionAllow
		}
	}
	return false
}

// checkIn applies inbound policies to an opened inner packet.
func checkIn(pols []Policy, pkt []byte) Counter {
	src, dst, ok := innerAddrs(pkt)
	if !ok {
		return XfrmInNoPols
	}
	for i := range pols {
		if pols[i].Selector.match(src, dst) {
			if pols[i].Action == ActionAllow {
				return CounterNone
			}
			return XfrmInPolBlock
		}
	}
	return XfrmInNoPols
}
