package ikenode

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"

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

func (m *Daemon) openKeylog(prefix string) error {
	if prefix == "" {
		return nil
	}
	prefix = keylogPrefix(prefix)
	k := &keylog{}
	var err error
	if k.ike, err = openKeyFile(prefix + KeylogIKEFile); err != nil {
		return err
	}
	if k.esp, err = openKeyFile(prefix + KeylogESPFile); err != nil {
		k.ike.Close()
		return err
	}
	m.keylog = k
	m.log.Warnf("ike: KEYLOG ON: every negotiated IKE and ESP key is written to %s%s and %s%s; whoever reads them decrypts the traffic. For debugging only: remove ike.keylog from the config",
		prefix, KeylogIKEFile, prefix, KeylogESPFile)
	return nil
}

// keylogPrefix returns the prefix of the keylog's file names: prefix, or
// for a directory, a path inside it.
func keylogPrefix(prefix string) string {
	if fi, err := os.Stat(prefix); err == nil && fi.IsDir() {
		// A directory (the config's path join drops a trailing
		// slash): the files go in it.
		return filepath.Join(prefix, "") + string(filepath.Separator)
	}
	return prefix
}

// CheckKeylog refuses the ike.keylog prefix when a file of it already
// exists that openKeyFile would refuse (for ipsecd check); it creates
// nothing.
func CheckKeylog(prefix string) error {
	if prefix == "" {
		return nil
	}
	prefix = keylogPrefix(prefix)
	for _, name := range []string{KeylogIKEFile, KeylogESPFile} {
		path := prefix + name
		fi, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err == nil {
			err = checkKeyFile(path, fi)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// openKeyFile opens path to append keys to, creating it with mode 0600,
// or refuses it (checkKeyFile). O_NOFOLLOW refuses a symbolic link
// without a race, and O_NONBLOCK makes the open of a FIFO fail instead
// of stalling the daemon.
func openKeyFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	switch {
	case errors.Is(err, syscall.ELOOP):
		return nil, errKeyFileLink(path)
	case errors.Is(err, syscall.ENXIO): // a FIFO with no reader
		return nil, fmt.Errorf("ike.keylog: %s is not a regular file: %w", path, err)
	case err != nil:
		return nil, fmt.Errorf("ike.keylog: %w", err)
	}
	fi, err := f.Stat()
	if err == nil {
		err = checkKeyFile(path, fi)
	} else {
		err = fmt.Errorf("ike.keylog: %w", err)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func errKeyFileLink(path string) error {
	return fmt.Errorf("ike.keylog: %s is a symbolic link: keys go only to a file of its own; remove the link", path)
}

// checkKeyFile refuses, naming path, a keylog file that would hand the
// keys to someone else: a symbolic link (whoever may write the directory
// would choose where the keys go), a file group or others may read (its
// mode is not changed for it: what it holds may have been read already),
// a file of another user, a file of more than one name (a hard link:
// whoever made it chose where the keys go, as with a symbolic link), and
// anything but a regular file.
func checkKeyFile(path string, fi fs.FileInfo) error {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return errKeyFileLink(path)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("ike.keylog: %s is not a regular file (%v)", path, fi.Mode().Type())
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("ike.keylog: %s has mode %#o: group or others may read the keys; chmod 600 it (or remove it, since what it holds may have been read)", path, fi.Mode().Perm())
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !ok:
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("ike.keylog: %s is owned by uid %d, not by this process (uid %d), who could read the keys", path, st.Uid, os.Geteuid())
	case st.Nlink > 1:
		return fmt.Errorf("ike.keylog: %s has %d names (hard links): keys go only to a file of its own; remove it", path, st.Nlink)
	}
	return nil
}

func (k *keylog) logIKE(s *ike.SA) {
	if k == nil {
		return
	}
	earlier := s.TakeKeylog()
	if line, ok := s.KeylogIKE(); ok {
		k.mu.Lock()
		fmt.Fprintln(k.ike, line)
		// Wireshark takes one key set per SPI pair: the last one, which
		// decrypts IKE_AUTH and everything after, is the line; the keys
		// that IKE_INTERMEDIATE's updates replaced (RFC 9370) follow as
		// comments, to swap in for the IKE_INTERMEDIATE messages.
		for i, l := range earlier {
			fmt.Fprintf(k.ike, "# before additional key exchange %d (IKE_INTERMEDIATE %d): %s\n", i+1, i+1, l)
		}
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
