package ikenode

import "github.com/ipsecd/ipsecd/config"

// eapUsers is the daemon's one store of EAP passwords (identity → the
// secret, a copy of the config's): every connection that authenticates
// with EAP, gateway or client, asks it at the time of a login
// (Daemon.eapSecret), so that a reload replaces it as a whole and
// changes who can log in without touching a connection or its SAs. A
// user's established SAs stay (as strongSwan's do); the user cannot log
// in again.
type eapUsers map[string][]byte

// wipe zeroes the store's secrets: it is dropped.
func (u eapUsers) wipe() {
	for _, k := range u {
		clear(k)
	}
}

// eapSecret is the engine's EAPSecret of every connection. The IKE loop
// owns m.eap, and the engine asks it from that loop only (handle, the
// timers), so Reload swaps it in the loop without a lock; the engine
// uses the bytes before it returns (the EAP client copies them), so the
// old store can be wiped as soon as it is swapped out.
func (m *Daemon) eapSecret(id string) ([]byte, bool) {
	k, ok := m.eap[id]
	return k, ok
}

// setEAPUsers makes ic's EAP users the store, wiping the one it replaces.
func (m *Daemon) setEAPUsers(ic *config.IKEConfig) {
	old := m.eap
	m.eap = ic.EAPUsers()
	old.wipe()
}
