package daemon

import (
	"slices"

	"github.com/ipsecd/ipsecd/config"
)

// EAP passwords loaded over vici (load-shared type EAP): they join the
// file's eap secrets in IKE's one user store, which a gateway reads at
// each login, the file's winning an identity both have (the store takes
// the first). A change of vici's secrets parses them again and hands IKE
// the result, so that a password loaded, replaced or unloaded counts
// from the next login on, as after a reload of the file.

// syncViciEAPLocked parses vici's secrets again for their EAP passwords
// and, when there were or are some, hands IKE its config again; the
// parsed passwords replaced are zeroed once IKE holds its copies. n.mu
// is held.
func (n *Daemon) syncViciEAPLocked() {
	old := n.loaded.eap
	n.loaded.eap = nil
	if len(n.loaded.secrets) > 0 {
		// Each was parsed alone when loaded: together they parse too.
		if cfg, err := parseVici(nil, nil, n.loaded.secrets, nil, nil); err == nil {
			n.loaded.eap = cfg
		} else {
			n.log.WithError(err).Error("vici: secrets")
		}
	}
	if hasEAP(old) || hasEAP(n.loaded.eap) {
		if err := n.applyViciLocked(n.loaded.conns); err != nil {
			n.log.WithError(err).Error("vici: EAP secrets")
		}
	}
	if old != nil {
		old.WipeKeys()
	}
}

// hasEAP reports whether cfg has an eap secret.
func hasEAP(cfg *config.Config) bool {
	return cfg != nil && slices.ContainsFunc(cfg.Secrets, func(s config.Secret) bool { return s.Type == config.SecretEAP })
}

// withViciEAP returns secrets (the file's) and then vici's EAP
// passwords, without copying a password: IKE's user store copies them.
// n.mu is held, or IKE is being started.
func (n *Daemon) withViciEAP(secrets []config.Secret) []config.Secret {
	if !hasEAP(n.loaded.eap) {
		return secrets
	}
	out := slices.Clone(secrets)
	for _, s := range n.loaded.eap.Secrets {
		if s.Type == config.SecretEAP {
			out = append(out, s)
		}
	}
	return out
}
