package daemon

import (
	"fmt"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/control"
)

// reload applies the config file at path (SIGHUP, ipsecd reload) and
// returns what changed, or why it was refused: the file's FILE:LINE
// errors, or what could not be made. A file that does not parse, or
// whose SAs or interfaces cannot be made, is refused whole and the
// running config stays. SAs unchanged in the file keep their state; the
// file owns what it names and what earlier files brought, and a reload
// changes only that: SAs and policies added over the control socket stay
// (package node, Ownership). Once applied, the new file's warnings are
// logged and the replaced config's keys zeroed (the SAs hold copies of
// their own).
func (n *Daemon) reload(path string) (control.ReloadResult, error) {
	cfg, err := config.Load(path) // on error, Load has zeroed what it decoded
	if err != nil {
		n.log.WithField("config", path).Errorf("reload refused, the running config stays:\n%v", err)
		return control.ReloadResult{File: path}, err
	}
	res, prev, err := n.applyConfig(cfg)
	if err != nil {
		return res, err
	}
	logConfigWarnings(n.log.WithField("config", path), cfg)
	res.Warnings = cfg.Warnings
	if prev != cfg {
		prev.WipeKeys()
	}
	return res, nil
}

// apply is applyConfig for callers that need only whether cfg was
// applied (the previous config's keys are then theirs to zero).
func (n *Daemon) apply(cfg *config.Config) (applied bool) {
	_, _, err := n.applyConfig(cfg)
	return err == nil
}

// applyConfig makes cfg, just loaded, the running config, or refuses it
// with the error it logged. Once applied, cfg is n.cfg, and prev, the
// config it replaced, is the caller's to zero (its keys). When refused,
// the SAs made for cfg are Discarded and cfg's keys zeroed here: nothing
// of it will be used. The running config and SAs are never wiped.
func (n *Daemon) applyConfig(cfg *config.Config) (res control.ReloadResult, prev *config.Config, err error) {
	res.File = cfg.File
	log := n.log.WithField("config", cfg.File)
	n.mu.Lock()
	defer n.mu.Unlock()
	prev = n.cfg
	applied := false
	defer func() {
		if !applied && cfg != n.cfg {
			cfg.WipeKeys()
		}
	}()
	// Whatever the outcome, the guards end up covering the running
	// config and what the interfaces still have: here for a refused
	// reload, and before the "reloaded" line for an applied one, so that
	// whoever reads that line finds the guards already in step.
	syncGuards := func() {
		if err := n.guards.sync(wantGuards(n.cfg, n.reg)); err != nil {
			log.WithError(err).Error("reload: fail-closed guards")
		}
		if err := n.routes.sync(wantRules(n.cfg)); err != nil {
			log.WithError(err).Error("reload: routing rules")
		}
	}
	defer func() {
		if !applied {
			syncGuards()
		}
	}()
	if cfg.Underlay != n.cfg.Underlay {
		log.Warn("reload: underlay changes take effect on restart")
	}
	if cfg.Control != n.cfg.Control || cfg.Metrics != n.cfg.Metrics || cfg.Pprof != n.cfg.Pprof || cfg.StateDir != n.cfg.StateDir {
		log.Warn("reload: control, metrics, pprof and state_dir changes take effect on restart")
	}
	b, err := n.buildStates(cfg)
	if err != nil {
		log.Errorf("reload refused, the running config stays:\n%v", err)
		return res, prev, err
	}
	// Guards of new routes before the routes; those of removed ones
	// go after them (syncGuards).
	if err := n.guards.ensure(wantGuards(cfg, n.reg)); err != nil {
		log.WithError(err).Error("reload: fail-closed guards")
	}
	// Interfaces first, so that SAs of new interfaces have somewhere
	// to deliver; then the SAD, new SAs in before old ones go
	// (make-before-break happens in one table swap).
	ifs, err := n.core.SyncInterfaces(interfaceConfigs(cfg))
	if err != nil && len(ifs.Added)+len(ifs.Removed)+len(ifs.Reconfigured)+len(ifs.Replaced)+len(ifs.Unchanged) == 0 {
		b.Discard()
		log.WithError(err).Error("reload refused, the running config stays")
		return res, prev, fmt.Errorf("reload refused, the running config stays: %w", err)
	}
	if err != nil {
		log.WithError(err).Error("reload: some interfaces failed")
		res.Warnings = append(res.Warnings, "some interfaces failed: "+err.Error())
	}
	ch, err := n.core.Sync(b, cfg.Policies)
	if err != nil {
		// Sync changes nothing when it fails: the running SAs stay.
		log.WithError(err).Error("reload: SAD")
		return res, prev, fmt.Errorf("reload refused, the running SAs stay: %w", err)
	}
	n.cfg = cfg
	applied = true
	n.reloadPools(cfg) // before IKE, whose new connections hand out their addresses
	n.reloadIKE(cfg)
	if err := n.reloadVici(cfg.Vici); err != nil {
		log.WithError(err).Error("reload")
		res.Warnings = append(res.Warnings, err.Error())
	}
	// The file is checked, so its log section is valid: apply it last,
	// so that a refused reload changes nothing.
	if err := ConfigureLog(n.log, cfg.Log); err != nil {
		log.WithError(err).Error("reload: log")
	}
	syncGuards()
	res = control.ReloadResult{File: cfg.File, Warnings: res.Warnings,
		InterfacesAdded: len(ifs.Added), InterfacesRemoved: len(ifs.Removed), InterfacesReconfigured: len(ifs.Reconfigured),
		InterfacesReplaced: len(ifs.Replaced),
		StatesAdded:        ch.StatesAdded, StatesRemoved: ch.StatesRemoved, StatesKept: ch.StatesKept, StatesTaken: ch.StatesTaken,
		StatesUpdated: ch.StatesUpdated, PoliciesAdded: ch.PoliciesAdded, PoliciesRemoved: ch.PoliciesRemoved,
		PoliciesKept: ch.PoliciesKept, PoliciesTaken: ch.PoliciesTaken}
	log.WithFields(logrus.Fields{
		"added": res.InterfacesAdded, "removed": res.InterfacesRemoved, "reconfigured": res.InterfacesReconfigured,
		"replaced":     res.InterfacesReplaced,
		"states_added": ch.StatesAdded, "states_removed": ch.StatesRemoved, "states_kept": ch.StatesKept, "states_taken": ch.StatesTaken,
		"states_updated": ch.StatesUpdated,
		"policies_added": ch.PoliciesAdded, "policies_removed": ch.PoliciesRemoved, "policies_kept": ch.PoliciesKept,
		"policies_taken": ch.PoliciesTaken,
	}).Info("reloaded: " + cfg.Summary())
	return res, prev, nil
}
