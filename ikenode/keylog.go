package ikenode

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/ipsecd/ipsecd/ike"
)

// Keylog file names, after the ike.keylog prefix: Wireshark's own names
// for its IKEv2 and ESP key tables (Preferences, Protocols, ISAKMP and
// ESP), so that a prefix of a directory makes files Wireshark reads.
const (
	KeylogIKEFile = "ikev2_decryption_table"
	KeylogESPFile = "esp_sa"
)

// keylog appends the negotiated keys to the two files, for debugging
// only. A nil *keylog writes nothing.
type keylog struct {
	mu       sync.Mutex
	ike, esp *os.File
}

func (m *Manager) openKeylog(prefix string) error {
	if prefix == "" {
		return nil
	}
	if fi, err := os.Stat(prefix); err == nil && fi.IsDir() {
		// A directory (the config's path join drops a trailing
		// slash): the files go in it.
		prefix = filepath.Join(prefix, "") + string(filepath.Separator)
	}
	k := &keylog{}
	var err error
	if k.ike, err = os.OpenFile(prefix+KeylogIKEFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err != nil {
		return fmt.Errorf("ike: keylog: %w", err)
	}
	if k.esp, err = os.OpenFile(prefix+KeylogESPFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err != nil {
		k.ike.Close()
		return fmt.Errorf("ike: keylog: %w", err)
	}
	m.keylog = k
	m.log.Warnf("ike: KEYLOG ON: every negotiated IKE and ESP key is written to %s%s and %s%s; whoever reads them decrypts the traffic. For debugging only: remove ike.keylog from the config",
		prefix, KeylogIKEFile, prefix, KeylogESPFile)
	return nil
}

func (k *keylog) logIKE(s *ike.SA) {
	if k == nil {
		return
	}
	if line, ok := s.KeylogIKE(); ok {
		k.mu.Lock()
		fmt.Fprintln(k.ike, line)
		k.mu.Unlock()
	}
}

func (k *keylog) logESP(c *ike.Child) {
	if k == nil {
		return
	}
	if lines, ok := c.KeylogESP(); ok {
		k.mu.Lock()
		for _, l := range lines {
			fmt.Fprintln(k.esp, l)
		}
		k.mu.Unlock()
	}
}

func (k *keylog) close() {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.ike.Close()
	k.esp.Close()
}
