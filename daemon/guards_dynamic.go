package daemon

import (
	"github.com/ipsecd/ipsecd/tun"
)

// A road warrior's routes come and go with its children (roadroutes.go),
// and each is guarded as a configured route is, in its interface's
// table: a crash leaves the guard, and until the next start (whose adopt
// removes the guards its config does not want) the kernel refuses what
// the tunnel carried instead of sending it in clear. A guard the config
// wants too stays when its route goes.

// addDynamic guards a road warrior's route; a guard there already (the
// config's, another route's) is counted, not added again.
func (g *guards) addDynamic(gd tun.Guard) error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.dynamic == nil {
		g.dynamic = map[tun.Guard]int{}
	}
	if g.have == nil {
		g.have = map[tun.Guard]bool{}
	}
	if !g.have[gd] {
		if err := g.table.Add(gd); err != nil {
			return err
		}
		g.have[gd] = true
		g.log.WithField("guard", gd.String()).Debug("fail-closed guard added for a road warrior's route")
	}
	g.dynamic[gd]++
	return nil
}

// removeDynamic lets go of a guard addDynamic counted; the last one
// removes it unless the config wants it.
func (g *guards) removeDynamic(gd tun.Guard) error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.dynamic[gd] == 0 {
		return nil
	}
	if g.dynamic[gd]--; g.dynamic[gd] > 0 {
		return nil
	}
	delete(g.dynamic, gd)
	if g.configured[gd] || !g.have[gd] {
		return nil
	}
	if err := g.table.Remove(gd); err != nil {
		return err
	}
	delete(g.have, gd)
	delete(g.leftover, gd)
	g.log.WithField("guard", gd.String()).Debug("fail-closed guard of a road warrior's route removed")
	return nil
}
