package sa

import (
	"fmt"
	"net/netip"
	"slices"
)

// The SPD half of the SAD: the policies of the xfrm interfaces.

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
		return fmt.Errorf("policy dir %s if_id %d %v: %w", p.Dir, p.IfID, p.Selector, ErrExists)
	}
	c := change(old)
	f := c.iface(p.IfID).f
	f.inPol, f.outPol, f.outAcq = slices.Clip(f.inPol), slices.Clip(f.outPol), slices.Clip(f.outAcq)
	f.addPolicy(p)
	c.t.policies = append(slices.Clip(old.policies), p)
	d.table.Store(&c.t)
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
		return fmt.Errorf("policy dir %s if_id %d %v: %w", p.Dir, p.IfID, p.Selector, ErrNotFound)
	}
	c := change(old)
	c.t.policies = slices.Delete(slices.Clone(old.policies), i, i+1)
	f := c.iface(p.IfID).f
	if j := slices.IndexFunc(f.outPol, same); j >= 0 {
		f.outPol = slices.Delete(slices.Clone(f.outPol), j, j+1)
		f.outAcq = slices.Delete(slices.Clone(f.outAcq), j, j+1)
	}
	f.inPol = slices.DeleteFunc(slices.Clone(f.inPol), same)
	d.table.Store(&c.t)
	return nil
}

// validatePolicy applies CheckPolicy's rules but the if_id, which may be
// 0 in a SAD without interfaces.
func validatePolicy(p Policy) error {
	return checkPolicy(&p, false).err()
}

func (f *iface) hasPolicy(p Policy) bool {
	list := f.outPol
	if p.Dir == DirIn {
		list = f.inPol
	}
	return slices.ContainsFunc(list, func(q Policy) bool { return q.Selector == p.Selector })
}

// addPolicy appends p to f's policies, in place: clip slices that a
// published table shares first.
func (f *iface) addPolicy(p Policy) {
	if p.Dir == DirIn {
		f.inPol = append(f.inPol, p)
	} else {
		f.outPol = append(f.outPol, p)
		f.outAcq = append(f.outAcq, new(acquireState))
	}
}

// firstMatch returns the index of the policy of pols that decides for a
// packet from src to dst, the first that matches, or -1: no match
// blocks.
func firstMatch(pols []Policy, src, dst netip.Addr) int {
	for i := range pols {
		if pols[i].Selector.match(src, dst) {
			return i
		}
	}
	return -1
}

// matchPrefix: an invalid prefix matches any address.
func matchPrefix(p netip.Prefix, a netip.Addr) bool {
	return !p.IsValid() || p.Contains(a)
}

func (sel *Selector) match(src, dst netip.Addr) bool {
	return matchPrefix(sel.Src, src) && matchPrefix(sel.Dst, dst)
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
