package seqstate

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/ipsecd/ipsecd/internal/atomicfile"
	"github.com/ipsecd/ipsecd/sa"
)

// Block sizes of the outbound reservations (see the package doc).
const (
	ESNBlock = 1 << 24
	Block    = 1 << 18
)

// SaveInterval is how often RoutineSaveTops writes the inbound tops that
// changed: the window of packets that could be replayed after a crash.
const SaveInterval = 100 * time.Millisecond

const (
	secretName = "secret"
	secretLen  = 32
	recordExt  = ".seq"
)

// Dir is an open state directory.
type Dir struct {
	path   string
	secret []byte
	lock   *os.File // the directory, flock'ed while open

	// flushMu serialises Flush (RoutineSaveTops and the final one), and
	// guards flushing, the list Flush copies tracked into: kept from one
	// Flush to the next, so that ten a second allocate nothing (with
	// 10,000 SAs a fresh list was 1.6 MB/s of garbage).
	flushMu  sync.Mutex
	flushing []flushItem

	mu sync.Mutex
	// mu guards: records (one per key, shared by every SA with the key)
	// and tracked (the inbound SAs whose tops are saved).
	records map[string]*Record
	tracked map[*sa.SA]*tracked
}

type flushItem struct {
	s *sa.SA
	t *tracked
}

type tracked struct {
	rec    *Record
	failed bool // the last save failed (logged once, until it works again)
}

// Open opens the state directory at path, creating it (mode 0700) and its
// secret when missing. It refuses a directory that group or others may
// write to, or that another user owns, and a secret file that is not 32
// bytes or that group or others may read. Every error names path.
func Open(path string) (*Dir, error) {
	if path == "" {
		return nil, errors.New("state_dir: empty")
	}
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, fmt.Errorf("state_dir %s: %w", path, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("state_dir %s: %w", path, err)
	}
	if err := checkOwner(path, fi, true); err != nil {
		return nil, err
	}
	// One process per directory: each keeps a record's state in memory
	// and writes it whole, so two would overwrite each other's
	// reservations (and reuse nonces after the next restart).
	lock, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("state_dir %s: %w", path, err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("state_dir %s: in use by another process (another ipsecd or sidecar): give each its own state_dir", path)
		}
		return nil, fmt.Errorf("state_dir %s: lock: %w", path, err)
	}
	d := &Dir{path: path, lock: lock, records: map[string]*Record{}, tracked: map[*sa.SA]*tracked{}}
	if d.secret, err = loadSecret(path); err == nil {
		// Records are written when SAs first seal; a directory that
		// cannot take them (a read-only mount, a full disk) is found
		// now, at start, instead.
		err = probe(path)
	}
	if err != nil {
		lock.Close()
		return nil, err
	}
	return d, nil
}

// probe writes, syncs and removes a file in dir.
func probe(dir string) error {
	const name = ".probe"
	if err := writeNew(dir, name, []byte("ipsecd")); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("state_dir %s: %w", dir, err)
	}
	return nil
}

// Close releases the directory for another process (or a later Open).
// The Dir must not be used afterwards; call Flush first for the final
// tops.
func (d *Dir) Close() error { return d.lock.Close() }

// Path returns the directory's path.
func (d *Dir) Path() string { return d.path }

// checkOwner refuses fi (at path) when group or others may write to it
// (a directory) or read it (a file), or when another user owns it.
func checkOwner(path string, fi fs.FileInfo, dir bool) error {
	if dir && !fi.IsDir() {
		return fmt.Errorf("state_dir %s: not a directory", path)
	}
	if !dir && !fi.Mode().IsRegular() {
		return fmt.Errorf("state_dir: %s: not a regular file", path)
	}
	if dir && fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("state_dir %s: mode %#o lets group or others write to it, and so replace its records: chmod 700 it",
			path, fi.Mode().Perm())
	}
	if !dir && fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("state_dir: %s: mode %#o lets group or others read it: chmod 600 it", path, fi.Mode().Perm())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("state_dir %s: owned by uid %d, not by this process (uid %d)", path, st.Uid, os.Geteuid())
	}
	return nil
}

// loadSecret reads the directory's secret, making it first when there is
// none. A new secret is written whole or not at all (temporary file,
// fsync, rename).
func loadSecret(dir string) ([]byte, error) {
	p := filepath.Join(dir, secretName)
	b, err := readSmall(p, secretLen)
	if err == nil {
		return b, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	// A directory with records but no secret cannot name them any more:
	// a new secret would start every key again at 1.
	if m, _ := filepath.Glob(filepath.Join(dir, "*"+recordExt)); len(m) != 0 {
		return nil, fmt.Errorf("state_dir: %s is missing but %d records are there: they cannot be read without it; "+
			"restore it, or give every SA a new key and empty the directory", p, len(m))
	}
	b = make([]byte, secretLen)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("state_dir: %s: %w", p, err)
	}
	if err := writeNew(dir, secretName, b); err != nil {
		return nil, err
	}
	return b, nil
}

// readSmall reads the file at p, which must be a regular file of this
// process's user, unreadable by others, of exactly n bytes.
func readSmall(p string, n int) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("state_dir: %w", err)
	}
	if err := checkOwner(p, fi, false); err != nil {
		return nil, err
	}
	if fi.Size() != int64(n) {
		return nil, fmt.Errorf("state_dir: %s: %d bytes, want %d: the file is damaged", p, fi.Size(), n)
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, fmt.Errorf("state_dir: %s: %w", p, err)
	}
	return b, nil
}

// writeNew writes a file whole, or not at all (atomicfile.Write).
func writeNew(dir, name string, data []byte) error {
	if err := atomicfile.Write(dir, name, data); err != nil {
		return fmt.Errorf("state_dir: %w", err)
	}
	return nil
}

// name returns the record name of c's key material: the hex HMAC-SHA-256,
// under the directory's secret, of the algorithm names and keys, each
// length-prefixed so that no two configs run together into one input.
func (d *Dir) name(c *sa.Config) string {
	m := hmac.New(sha256.New, d.secret)
	m.Write([]byte("ipsecd seqstate v1"))
	var n [4]byte
	for _, a := range []*sa.Algorithm{c.AEAD, c.Enc, c.Auth} {
		if a == nil {
			binary.BigEndian.PutUint32(n[:], 0) // absent: length 0; present: length+1
			m.Write(n[:])
			continue
		}
		for _, f := range [][]byte{[]byte(a.Name), a.Key} {
			binary.BigEndian.PutUint32(n[:], uint32(len(f))+1)
			m.Write(n[:])
			m.Write(f)
		}
	}
	return hex.EncodeToString(m.Sum(nil)) + recordExt
}

// Record returns the record of c's key material, reading it from the
// directory the first time. An SA of the same key gets the same Record.
func (d *Dir) Record(c *sa.Config) (*Record, error) {
	name := d.name(c)
	d.mu.Lock()
	defer d.mu.Unlock()
	if r := d.records[name]; r != nil {
		return r, nil
	}
	r, err := loadRecord(d.path, name)
	if err != nil {
		return nil, err
	}
	d.records[name] = r
	return r, nil
}
